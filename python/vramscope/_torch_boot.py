"""Starting the PyTorch adapter at the right moment: when CUDA is initialised, never before,
so that processes that import torch without using a GPU (DataLoader workers, the torchrun
agent) create no channel."""

import os

from ._torch import TorchAdapter
from ._torch_hooks import TorchHooks
from ._torch_source import TorchCudaSource


def torch_adapter(torch, config):
    version = getattr(torch, "__version__", "")
    framework = ("torch " + str(version)).strip()
    alloc_conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or os.environ.get("PYTORCH_ALLOC_CONF", "")
    sites = None
    if config.sites:
        from ._sites import Sites

        sites = Sites(torch, config)
    return TorchAdapter(
        TorchCudaSource(torch),
        config,
        framework=framework,
        allocator_config=alloc_conf,
        hooks=TorchHooks(torch, config),
        sites=sites,
    )


def defer_until_cuda(torch, callback):
    """Runs `callback` once CUDA is initialised (at once if it is); False if it cannot tell.

    `torch.cuda._lazy_call` runs queued calls inside CUDA initialisation, where an exception
    would surface in the user's code as a DeferredCudaCallError: the callback is shielded.
    """

    def vramscope_on_cuda_init():
        try:
            callback()
        except Exception:
            pass

    cuda = torch.cuda
    lazy_call = getattr(cuda, "_lazy_call", None)
    if lazy_call is not None:
        lazy_call(vramscope_on_cuda_init)
        return True
    if cuda.is_initialized():
        vramscope_on_cuda_init()
        return True
    return False
