from . import optimizer  # noqa: F401
from .optimizer import Optimizer  # noqa: F401

# As torch/optim/__init__.py does: the submodule is reachable only through sys.modules.
del optimizer  # noqa: F821
