"""A stand-in for torch with the entry points vramscope uses and the same lazy CUDA
initialisation, driven by tests through `torch._C._fake_*`. Importing it records the import
in $FAKE_TORCH_LOG so tests can tell what ran.

Kept only for what the real package cannot do on a machine without a GPU: the zero-code
bootstrap tests (test_bootstrap.py) run whole programs in fresh interpreters that initialise
CUDA themselves (`torch.cuda.init()`, a tensor on the device), fork, and die of an allocator
OOM; real torch raises there without a driver. Everything that can run on the real torch
with only driver entry points simulated is in test_real_torch.py. Where the fake and torch
differ in something the writer relies on, the fake follows torch (e.g. `torch.optim` has no
`optimizer` attribute)."""

import os

__version__ = "2.5.1+fake"

from . import _C  # noqa: E402
from . import cuda  # noqa: E402
from . import optim  # noqa: E402
from . import nn  # noqa: E402
from . import autograd  # noqa: E402

_grad_enabled = False


class Tensor:
    requires_grad = False


def is_grad_enabled():
    return _grad_enabled


if os.environ.get("FAKE_TORCH_LOG"):
    with open(os.environ["FAKE_TORCH_LOG"], "a") as _f:
        _f.write("imported %d\n" % os.getpid())
