from . import optimizer  # noqa: F401
from .optimizer import Optimizer  # noqa: F401
