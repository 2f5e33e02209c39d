"""Choosing the adapter that reads a framework's figures, and the plain one that reads none."""

import sys

from . import _layout as L


class PlainAdapter:
    """The explicit API only (`report`): nothing to sample, so only a heartbeat."""

    kind = L.KIND_PYTHON
    period = None
    exact = False
    flags = 0
    allocator_config = ""

    def __init__(self):
        self.framework = "python %d.%d.%d" % sys.version_info[:3]

    def attach(self, runtime):
        pass

    def tick(self, session, hook):
        pass

    def detach(self):
        pass


def make_adapter(framework, config):
    if framework == "torch":
        from ._torch_boot import torch_adapter

        return torch_adapter(sys.modules["torch"], config)
    if framework == "jax":
        from ._jax import JaxAdapter, JaxSource

        return JaxAdapter(JaxSource(sys.modules["jax"]), config)
    if framework == "cupy":
        from ._cupy import CupyAdapter, CupySource

        return CupyAdapter(CupySource(sys.modules["cupy"]), config)
    if framework == "python":
        return PlainAdapter()
    raise ValueError("unknown framework %r" % (framework,))
