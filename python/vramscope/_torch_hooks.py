"""What the PyTorch adapter installs in torch once CUDA is initialised: step boundaries from
the optimizer, the allocator's OOM observer, events around `empty_cache` and snapshots, exact
peak virtualisation and, on request, module attribution.

Every hook goes through `_runtime.run` (the step hook through `run_deferred`), which takes
the writer's lock and swallows errors; a hook that outlives its writer (the OOM observer
cannot be detached) does nothing.
"""

import sys

from . import _layout as L
from . import _runtime
from . import _torch_categories
from . import _torch_virtual


def _replay_step(rt, t, readings, kinds=()):
    rt.adapter.replay(rt.session, t, readings)
    try:
        for device, figures in kinds:
            state = rt.adapter.slot_of_device(rt.session, device)
            if state is not None:
                rt.session.memory_kinds(state, figures, t)
    except Exception as e:
        # The step's end is never lost to the memory by kind.
        _runtime.internal_error(e)
    rt.session.end_step(t)


def _kinds_by_cuda_device(measured):
    """(device index, (parameters, buffers, gradients, optimizer state)) for each CUDA device
    in `Categories.measure`'s answer. The buffers are not known from an optimizer alone
    (they belong to modules, which a zero-code writer does not hold): absent."""
    out = []
    for (device_type, index), kinds in measured.items():
        if device_type != "cuda" or index is None:
            continue
        out.append(
            (
                index,
                (
                    kinds[_torch_categories.PARAMETERS],
                    None,
                    kinds[_torch_categories.GRADIENTS],
                    kinds[_torch_categories.OPTIMIZER],
                ),
            )
        )
    return out


def _sync_step(rt, done):
    """An attached writer's first step: the job's own count where its optimizer keeps one
    (`done` steps taken, so the step ending now is `done - 1`), else counted from the attach,
    which every sample then says (`SAMPLE_STEP_SINCE_ATTACH`) so that every reader shows
    "since attach" beside the step; said once, as a note, either way."""
    if done is not None and done > 0:
        rt.session.step = done - 1
        rt.session.note("steps are the job's own: %d taken before this one (the optimizer's state)" % (done - 1))
    else:
        rt.session.steps_since_attach = True
        rt.session.note("steps count from the attach: the optimizer keeps no step count")


def optimizer_steps_taken(optimizer):
    """The steps `optimizer` has taken, from its per-parameter state (Adam's and AdamW's
    `step`, SGD with momentum keeps none), or None. A count held on a GPU is not read: that
    would wait for the device."""
    try:
        for group in optimizer.param_groups:
            for param in group.get("params", ()):
                state = optimizer.state.get(param)
                if not state or "step" not in state:
                    continue
                step = state["step"]
                device = getattr(step, "device", None)
                if device is not None and getattr(device, "type", "cpu") != "cpu":
                    return None
                return int(step)
    except Exception:
        return None
    return None


def _compiling_check(torch):
    compiler = getattr(torch, "compiler", None)
    return getattr(compiler, "is_compiling", None) or (lambda: False)


class TorchHooks:
    def __init__(self, torch, config):
        self._torch = torch
        self._config = config
        self._undo = []
        self._adapter = None
        self._first_optimizer = None
        # Memory by kind, counted at each step boundary from the stepping optimizer.
        self._categories = _torch_categories.Categories(torch)
        # An attached writer takes the job's step at its first step boundary.
        self._step_synced = False

    def install(self, runtime, adapter):
        self._adapter = adapter
        for step in (
            self._optimizer_hook,
            self._oom_observer,
            self._cache_events,
            self._history_calls,
            self._virtualise,
            self._modules,
        ):
            try:
                step()
            except Exception as e:
                _runtime.internal_error(e)

    def remove(self):
        undo, self._undo = self._undo, []
        for fn in reversed(undo):
            try:
                fn()
            except Exception:
                pass

    def _mine(self, rt):
        return rt.adapter is self._adapter

    # -- steps ------------------------------------------------------------------------------

    def _optimizer_hook(self):
        # `torch/optim/__init__.py` deletes its `optimizer` submodule attribute after import,
        # so `torch.optim.optimizer` fails on real torch; the module stays in sys.modules.
        module = sys.modules.get("torch.optim.optimizer") or getattr(self._torch.optim, "optimizer", None)
        register = getattr(module, "register_optimizer_step_post_hook", None)
        if register is None:
            raise RuntimeError("torch has no optimizer step hook: steps are not automatic")
        compiling = _compiling_check(self._torch)

        def vramscope_step_hook(optimizer, args, kwargs):
            # Inside a torch.compile trace the writer's lock would break the graph ("frame
            # skipped"); a compiled step is not marked, as module attribution does.
            if compiling():
                return
            _runtime.run_deferred(self._auto_step, optimizer)
            sites = self._adapter.sites if self._adapter is not None else None
            if sites is not None:
                try:
                    sites.on_training_thread()
                except Exception as e:
                    _runtime.internal_error(e)

        handle = register(vramscope_step_hook)
        self._undo.append(handle.remove)

    def _auto_step(self, rt, optimizer):
        if not self._mine(rt) or rt.explicit_steps:
            return
        # With several optimizers (a GAN's two, say) the first one to step marks the steps.
        if self._first_optimizer is None:
            self._first_optimizer = id(optimizer)
        elif self._first_optimizer != id(optimizer):
            return
        # Only the reading is taken here, on the training thread; publishing it and closing
        # the step wait for the sampler's next tick or the writer's next call, whichever is
        # first (bench_step_hook.py measures the difference).
        t = rt.session.clock()
        readings = self._adapter.capture()
        kinds = self._memory_kinds(optimizer)
        if _runtime.attached and not self._step_synced:
            self._step_synced = True
            rt.defer(_sync_step, optimizer_steps_taken(optimizer))
        rt.defer(_replay_step, t, readings, kinds)

    def _memory_kinds(self, optimizer):
        """Memory by kind on each CUDA device, read here, before the program's `zero_grad`
        frees the gradients. An optimizer or tensor this cannot read turns the counting
        off for the run, said once: the step itself is never lost to it."""
        if self._categories is None:
            return ()
        try:
            return _kinds_by_cuda_device(self._categories.measure([optimizer]))
        except Exception as e:
            self._categories = None
            _runtime.internal_error(e)
            return ()

    # -- OOM --------------------------------------------------------------------------------

    def _oom_observer(self):
        attach = getattr(self._torch._C, "_cuda_attach_out_of_memory_observer", None)
        if attach is None:
            return

        def vramscope_oom_observer(device, alloc, device_total, device_free):
            _runtime.run(self._on_oom, device, alloc, device_total, device_free)
            # The snapshot of this moment, before the exception unwinds; taken outside the
            # writer's lock, and never raising into the allocator.
            try:
                rt = _runtime.current()
                if rt is not None and self._mine(rt) and self._adapter.sites is not None:
                    # The third argument is the allowed maximum under a memory fraction.
                    total = self._adapter._total(int(device))
                    total = device_total if total is None else total
                    self._adapter.sites.on_oom(int(device), alloc, total, device_free)
            except Exception:
                pass

        try:
            attach(vramscope_oom_observer)
        except Exception:
            # cudaMallocAsync, managed and pluggable allocators refuse observers.
            pass

    def _on_oom(self, rt, device, alloc, device_total, device_free):
        if self._mine(rt):
            self._adapter.on_oom(rt.session, int(device), alloc, device_total, device_free)

    # -- empty_cache and snapshots ----------------------------------------------------------

    def _cache_events(self):
        cuda = self._torch.cuda
        memory = getattr(cuda, "memory", cuda)
        original_empty = memory.empty_cache
        self._replace(self._empty_cache_wrapper(original_empty), original_empty, "empty_cache", (memory, cuda))
        accelerator = getattr(self._torch, "accelerator", None)
        accelerator_memory = getattr(accelerator, "memory", None)
        original_accel_empty = getattr(accelerator_memory, "empty_cache", None)
        if original_accel_empty is not None:
            self._replace(
                self._empty_cache_wrapper(original_accel_empty),
                original_accel_empty,
                "empty_cache",
                (accelerator_memory, accelerator),
            )
        original_dump = getattr(memory, "_dump_snapshot", None)
        if original_dump is not None:

            def _dump_snapshot(*args, **kwargs):
                filename = args[0] if args else kwargs.get("filename", "dump_snapshot.pickle")
                result = original_dump(*args, **kwargs)
                _runtime.run(
                    lambda rt: self._mine(rt)
                    and rt.session.event(L.EV_SNAPSHOT_WRITTEN, L.NO_SLOT, (), str(filename))
                )
                return result

            self._replace(_dump_snapshot, original_dump, "_dump_snapshot", (memory,))

    def _history_calls(self):
        # With sites on, the program's own later calls make the history its own: vramscope
        # then never turns it off, and reports the ring size the program chose.
        if self._adapter.sites is None:
            return
        cuda = self._torch.cuda
        memory = getattr(cuda, "memory", cuda)
        original = memory._record_memory_history

        def _record_memory_history(*args, **kwargs):
            result = original(*args, **kwargs)
            _runtime.run(lambda rt: self._mine(rt) and self._adapter.sites.program_called(args, kwargs))
            return result

        self._replace(_record_memory_history, original, "_record_memory_history", (memory,))

    def _empty_cache_wrapper(self, original):
        # The wrappers pass on whatever torch's own signature takes (`_dump_snapshot` grew
        # `augment_with_fx_traces`): the program's call must reach torch unchanged.
        def empty_cache(*args, **kwargs):
            before = _runtime.run(self._reserved)
            result = original(*args, **kwargs)
            after = _runtime.run(self._reserved)
            _runtime.run(self._emit_empty_cache, before, after)
            return result

        return empty_cache

    def _reserved(self, rt):
        if not self._mine(rt):
            return None
        device = self._torch.cuda.current_device()
        return device, self._adapter.reserved_now(device)

    def _emit_empty_cache(self, rt, before, after):
        if not self._mine(rt) or before is None or after is None:
            return
        state = rt.session.slot(("torch", before[0]))
        slot = state.slot if state is not None else L.NO_SLOT
        rt.session.event(L.EV_EMPTY_CACHE, slot, (before[1], after[1]))

    def _replace(self, fn, original, name, modules):
        fn.__doc__ = getattr(original, "__doc__", None)
        fn.__wrapped__ = original
        for module in modules:
            if getattr(module, name, None) is original:
                setattr(module, name, fn)
                self._undo.append(lambda m=module: getattr(m, name, None) is fn and setattr(m, name, original))

    # -- exact peaks ------------------------------------------------------------------------

    def _virtualise(self):
        if not self._config.exact_peaks:
            return
        cuda = self._torch.cuda
        memory = getattr(cuda, "memory", cuda)
        device_index = memory._get_device_index
        source = self._adapter.source

        def view(index, nested):
            out = _runtime.run(lambda rt: self._adapter.user_view(index, nested) if self._mine(rt) else nested)
            return nested if out is None else out

        def reset(index):
            done = _runtime.run(lambda rt: self._mine(rt) and (self._adapter.user_reset(index) or True))
            if not done:
                source.reset_peak(index)

        for name, fn, original in _torch_virtual.wrappers(memory, device_index, view, reset):
            self._replace(fn, original, name, (memory, cuda))
        # torch.accelerator's statistics (which Inductor reads) come from the same allocator
        # through other entry points.
        accelerator = getattr(self._torch, "accelerator", None)
        accelerator_memory = getattr(accelerator, "memory", None)
        if getattr(accelerator_memory, "memory_stats", None) is None:
            return

        def view_flat(index, flat):
            out = _runtime.run(lambda rt: self._adapter.user_view_flat(index, flat) if self._mine(rt) else flat)
            return flat if out is None else out

        accel_index = getattr(accelerator_memory, "_get_device_index", device_index)
        for name, fn, original in _torch_virtual.accelerator_wrappers(accelerator_memory, accel_index, view_flat, reset):
            self._replace(fn, original, name, (accelerator_memory, accelerator))

    # -- module attribution -----------------------------------------------------------------

    def _modules(self):
        if not self._config.modules:
            return
        from ._torch_modules import ModuleTracker

        tracker = ModuleTracker(self._torch, self._set_module_label)
        self._undo.append(tracker.install())

    def _set_module_label(self, label):
        _runtime.run(lambda rt: self._mine(rt) and rt.session.set_module_label(label))
