"""torch.cuda: lazy initialisation with queued calls, as the real one."""

import os

from .. import _C
from .memory import *  # noqa: F401,F403
from .memory import _get_device_index  # noqa: F401
from . import memory  # noqa: F401

_initialized = False
_initializing = False
_queued_calls = []


class OutOfMemoryError(RuntimeError):
    pass


class DeferredCudaCallError(Exception):
    pass


def is_initialized():
    return _initialized


def _lazy_call(callable, **kwargs):
    if is_initialized():
        callable()
    else:
        _queued_calls.append((callable, "stack"))


def _lazy_init():
    global _initialized, _initializing
    if _initialized or _initializing:
        return
    _initializing = True
    if os.environ.get("FAKE_TORCH_LOG"):
        with open(os.environ["FAKE_TORCH_LOG"], "a") as f:
            f.write("cuda init %d\n" % os.getpid())
    try:
        for queued, _ in _queued_calls:
            try:
                queued()
            except Exception as e:
                raise DeferredCudaCallError("CUDA call failed lazily: %s" % e)
    finally:
        _initializing = False
    _initialized = True


def init():
    _lazy_init()


def device_count():
    return _C.DEVICES


def current_device():
    return 0


class _CUuuid:
    def __init__(self, i):
        self.bytes = [0x10 * i + k for k in range(16)]

    def __str__(self):
        return "uuid-object"


class _Props:
    def __init__(self, i):
        self.name = "Fake H100"
        self.total_memory = 80 * _C.GIB
        self.uuid = _CUuuid(i)
        self.pci_domain_id = 0
        self.pci_bus_id = 0x18 + i
        self.pci_device_id = 0


def get_device_properties(i):
    _lazy_init()
    return _Props(i)


def mem_get_info(device=None):
    _lazy_init()
    i = _get_device_index(device, optional=True)
    used = _C._device(i)["reserved_bytes"]["all"]["current"]
    return (80 * _C.GIB - used - _C.GIB, 80 * _C.GIB)
