"""Memory by kind (parameters, buffers, gradients, optimizer state), read from the objects
the writer already reaches: the optimizers whose steps are the step boundaries, and the
modules their parameters belong to where the writer knows them. Never by wrapping an
allocation: what is read here is what those objects hold at the moment of the call.

Each storage is counted once, under the first kind that holds it (parameters, then
buffers, gradients, optimizer state), so tied weights and views are one figure, as
PyTorch's own `MemTracker` counts them. A CUDA storage is counted as its allocator block:
its size rounded up to 512 bytes, the caching allocator's smallest unit, which is how
`torch.cuda.memory_allocated()` counts it; elsewhere (the CPU, where the tests run) its
bytes as they are.

Parameters, buffers and optimizer state change rarely (a new parameter group, AdamW's state
made at its first step, a checkpoint loaded), so they are counted again only when what they
are made of changed: the parameters by identity and storage address, the optimizer state by
the identity of each parameter's state. Gradients come and go every step
(`zero_grad(set_to_none=True)`), so they are read at every call: one attribute per
parameter. The parameters are held weakly: a model the program drops is freed, not kept on
the GPU by its count.
"""

import weakref

PARAMETERS = "parameters"
BUFFERS = "buffers"
GRADIENTS = "gradients"
OPTIMIZER = "optimizer_state"
KINDS = (PARAMETERS, BUFFERS, GRADIENTS, OPTIMIZER)

# PyTorch's CUDA caching allocator rounds every block up to this (kMinBlockSize).
CUDA_BLOCK = 512


def _device_key(tensor):
    device = tensor.device
    return (device.type, device.index)


def _held(device, size):
    """The bytes a storage of `size` bytes holds on `device`: its allocator block on a GPU."""
    if device[0] == "cuda":
        return -(-size // CUDA_BLOCK) * CUDA_BLOCK
    return size


def _storage(tensor):
    """(device, storage address, bytes as the allocator holds them) of `tensor`'s storage."""
    storage = tensor.untyped_storage()
    device = _device_key(tensor)
    return device, storage.data_ptr(), _held(device, storage.nbytes())


def _optimizer_tensors(torch, optimizer):
    tensor = torch.Tensor
    for state in optimizer.state.values():
        values = state.values() if isinstance(state, dict) else (state,)
        for value in values:
            if isinstance(value, tensor):
                yield value


def _optimizer_params(optimizer):
    for group in optimizer.param_groups:
        for param in group.get("params", ()):
            yield param


class Counted:
    """Storages already counted in one count, by device and address."""

    def __init__(self):
        self.seen = set()
        self.bytes = {}

    def add(self, kind, tensor):
        if tensor is None or getattr(tensor, "is_meta", False):
            return None
        try:
            device, address, size = _storage(tensor)
        except Exception:
            # A tensor without a storage of its own (a functional or sparse wrapper).
            return None
        key = (device, address)
        if key in self.seen:
            return None
        self.seen.add(key)
        per_device = self.bytes.setdefault(device, dict.fromkeys(KINDS, 0))
        per_device[kind] += size
        return key, size


class Categories:
    """Measures parameters, buffers, gradients and optimizer state by device."""

    def __init__(self, torch):
        self._torch = torch
        self._stable_key = None
        # What the last count found: bytes by device and kind (gradients 0), the storages
        # it counted, each parameter once with its device, and the optimizer's storages.
        self._stable = {}
        self._seen = frozenset()
        self._params = ()
        self._optimizer = {}

    def measure(self, optimizers=(), modules=()):
        """{(device type, index): {kind: bytes}} for what `optimizers` and `modules` hold
        now. The parameters are the modules' and the optimizers' (a parameter in both is
        one); the buffers the modules'."""
        key = self._key(optimizers, modules)
        if key != self._stable_key:
            self._count_stable(optimizers, modules)
            self._stable_key = key
        out = {device: dict(kinds) for device, kinds in self._stable.items()}
        seen = set()
        for ref, device in self._params:
            param = ref()
            if param is None:
                continue
            grad = param.grad
            if grad is None:
                continue
            try:
                storage = grad.untyped_storage()
                address, size = storage.data_ptr(), storage.nbytes()
            except Exception:
                continue
            # A gradient lives on its parameter's device.
            storage_key = (device, address)
            if storage_key in seen or storage_key in self._seen:
                continue
            seen.add(storage_key)
            kinds = out.setdefault(device, dict.fromkeys(KINDS, 0))
            kinds[GRADIENTS] += _held(device, size)
            # A storage both a gradient and the optimizer hold is the gradient's.
            shared = self._optimizer.get(storage_key)
            if shared is not None:
                kinds[OPTIMIZER] -= shared
        return out

    def _key(self, optimizers, modules):
        """What the stable figures are made of, cheaply: the modules by identity, each
        optimizer's parameters by identity and its number of state entries. A module's
        parameter or buffer added or replaced outside an optimizer (rare after the first
        step) is seen at the next change of these."""
        parts = [tuple(map(id, modules))]
        for optimizer in optimizers:
            # `load_state_dict` replaces each parameter's state; AdamW's first step makes it.
            parts.append(tuple(map(id, optimizer.state.values())))
            for group in optimizer.param_groups:
                params = group.get("params", ())
                parts.append(tuple(map(id, params)))
                # `p.data = ...` (a cast, an offload) keeps the parameter, not its storage.
                parts.append(tuple(p.untyped_storage().data_ptr() for p in params))
        return tuple(parts)

    def _count_stable(self, optimizers, modules):
        params = []
        for module in modules:
            params.extend(module.parameters())
        for optimizer in optimizers:
            params.extend(_optimizer_params(optimizer))
        counted = Counted()
        unique = {}
        for param in params:
            if id(param) in unique:
                continue
            unique[id(param)] = (weakref.ref(param), _device_key(param))
            counted.add(PARAMETERS, param)
        for module in modules:
            for buffer in module.buffers():
                counted.add(BUFFERS, buffer)
        seen_before_optimizer = frozenset(counted.seen)
        optimizer = {}
        for each in optimizers:
            for tensor in _optimizer_tensors(self._torch, each):
                found = counted.add(OPTIMIZER, tensor)
                if found is not None:
                    optimizer[found[0]] = found[1]
        self._stable = counted.bytes
        self._seen = seen_before_optimizer
        self._params = tuple(unique.values())
        self._optimizer = optimizer
