from . import graph  # noqa: F401
