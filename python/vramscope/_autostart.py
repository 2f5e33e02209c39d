"""What the zero-code bootstrap arms at interpreter start: nothing but an import hook.

The PyTorch writer is armed when torch is imported and starts when CUDA is initialised, so
a process that never touches a GPU (launcher agents, DataLoader workers) creates nothing.
"""

from ._config import Config
from ._importhook import when_imported


def install(env=None):
    config = Config.from_env(env)
    if config.disabled or not config.autostart:
        return False
    when_imported("torch", lambda torch: _start_torch(config))
    return True


def _start_torch(config):
    # Imported only now: an interpreter that never imports torch never loads the writer.
    from . import _runtime

    _runtime.start("torch", config)
