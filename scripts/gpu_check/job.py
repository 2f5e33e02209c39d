"""The training job `scripts/gpu-check` runs, with no line of vramscope in it (the zero-code
path: `vramscope run` injects the writer).

    python job.py story      # the story the checker follows (GPU_CHECK_DIR must be set)
    python job.py timing N   # N timed steps; prints one JSON line with the per-step times

A small MLP trained with torch.optim.Adam on the GPU (`cuda:0`):
- steps 0..SPIKE-1 plain; the job holds still at `warm` after WARM steps;
- in step SPIKE's forward, a temporary of a quarter of the free memory is allocated, the job
  holds still with it live (`in-spike`), then frees it; the step ends as usual (the spike
  lives and dies inside the step); the job holds still again after it (`after-spike`);
- in step CAUGHT's forward a request larger than the whole GPU fails: torch.OutOfMemoryError
  is caught and the batch skipped (no optimizer step); the job holds still (`caught`);
- in step FATAL's forward a larger request fails again, uncaught: the job dies of it.

Every size comes from `torch.cuda.mem_get_info()`, so the same job runs on 80 GB and 141 GB
GPUs. Requests are multiples of 2 MiB, which the caching allocator does not round further, so
the figure the OOM observer gets is the job's own.

Holding still: the job writes `GPU_CHECK_DIR/<name>.json` (torch's figures of that moment:
`torch.cuda.memory_stats()`, the optimizer's step, `mem_get_info`), then waits, allocating
nothing, until the checker creates `<name>.go`: every reading the checker takes meanwhile
(nvidia-smi, `vramscope --json`, `/metrics`, the recording) is of the same instant.

With GPU_CHECK_SIMULATED=1 (`scripts/gpu-check --simulated`, on a machine without a GPU) the
real torch runs with only the driver simulated (python/tests/_simulated_cuda.py): the model
and the optimizer run on the CPU, and the GPU memory they would use is allocated on the
simulated allocator (2 GiB of weights, 3 GiB of activations a step, on a 16 GiB GPU with
1 GiB of CUDA context); the job rewrites the fake NVML's scenario ($FAKE_NVML_SCENARIO) after
every change, as hunt_job.py does, so that NVML sees what a driver would.
"""

import functools
import json
import os
import sys
import time

MIB = 1 << 20
GIB = 1 << 30
ROUND = 2 * MIB
WARM, SPIKE, CAUGHT, FATAL = 3, 5, 8, 11
SIMULATED = os.environ.get("GPU_CHECK_SIMULATED") == "1"
HOLD_DIR = os.environ.get("GPU_CHECK_DIR")
# The simulated GPU: as hunt_job.py's.
SIM_TOTAL, SIM_CONTEXT, SIM_WEIGHTS, SIM_ACTIVATIONS = 16 * GIB, GIB, 2 * GIB, 3 * GIB
SIM_UUID = "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"

if HOLD_DIR:
    # For the checker, which cannot wait on this process (the monitor in tmux runs it).
    with open(os.path.join(HOLD_DIR, "job.pid"), "w") as f:
        f.write(str(os.getpid()))

import torch  # noqa: E402


def round_up(n):
    return (n + ROUND - 1) // ROUND * ROUND


def round_down(n):
    return n // ROUND * ROUND


def write_scenario(path, pid, used):
    """The fake NVML's scenario: the simulated GPU with `used` bytes held, by `pid` when given."""
    processes = [{"pid": pid, "used_memory": used}] if pid else []
    scenario = {
        "devices": [
            {
                "name": "Simulated H100",
                "uuid": SIM_UUID,
                "pci_bus_id": "00000000:18:00.0",
                "memory_total": SIM_TOTAL,
                "memory_reserved": 0,
                "max_sm_clock": 1980,
                "max_mem_clock": 2619,
                "power_limit": 700000,
                "timeline": [
                    {"t": 0, "memory_used": used, "gpu_util": 90, "mem_util": 40, "temperature": 60, "power": 400000, "sm_clock": 1980, "mem_clock": 2619}
                ],
                "processes": [{"t": 0, "compute": processes}],
            }
        ]
    }
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(scenario, f)
    os.replace(tmp, path)


if sys.argv[1:2] == ["idle"]:
    write_scenario(sys.argv[2], None, 0)
    sys.exit(0)


class SimulatedMemory:
    """The simulated allocator behind `empty` and `release`, and the fake NVML kept in step."""

    def __init__(self):
        repo = os.environ["GPU_CHECK_REPO"]
        sys.path.insert(0, os.path.join(repo, "python", "tests"))
        import _simulated_cuda as sim

        here = os.path.abspath(__file__)

        class Cuda(sim.SimulatedCuda):
            # A stack as torch records it for the line that asked: this file's own helpers
            # (`empty`, `release`) are left out, as a C call leaves no Python frame.
            def _frames(self):
                h = self.history
                if h is None or h["context"] in (None, "state") or h["stacks"] not in ("python", "all"):
                    return []
                frames = sim._python_stack(3)
                return [f for f in frames if not (f["filename"] == here and f["name"] in ("empty", "release"))]

        self.cuda = Cuda(torch, total=SIM_TOTAL).install(initialised=False)
        # At exit, however it comes, the driver frees what the process held and NVML stops
        # listing it: so does the fake's scenario.
        import atexit

        atexit.register(write_scenario, os.environ["FAKE_NVML_SCENARIO"], None, 0)
        # Adam asks the accelerator's current stream whether a graph is being captured; the
        # simulated driver has no streams, and nothing is.
        torch.optim.Optimizer._accelerator_graph_capture_health_check = lambda self: None

    def start(self):
        self.cuda.initialise()  # the driver is up: the writer's queued start runs now
        self.weights = self.empty(SIM_WEIGHTS)

    def driver_sees(self):
        used = self.cuda.stats["reserved_bytes"]["all"]["current"] + SIM_CONTEXT
        write_scenario(os.environ["FAKE_NVML_SCENARIO"], os.getpid(), used)

    def empty(self, n):
        c = self.cuda
        allocated = c.stats["allocated_bytes"]["all"]["current"]
        if allocated + n > SIM_TOTAL - SIM_CONTEXT:
            # What the caching allocator does when a request does not fit: it frees its
            # cache and retries, runs its OOM observers, and raises with its message.
            c.stats["num_alloc_retries"] += 1
            free = c._free()
            reserved = c.stats["reserved_bytes"]["all"]["current"]
            message = (
                "CUDA out of memory. Tried to allocate %.2f GiB. GPU 0 has a total capacity of %.2f GiB "
                "of which %.2f GiB is free. Of the allocated memory %.2f GiB is allocated by PyTorch, "
                "and %.2f GiB is reserved by PyTorch but unallocated."
                % (n / GIB, SIM_TOTAL / GIB, free / GIB, allocated / GIB, (reserved - allocated) / GIB)
            )
            c.fail(n)
            raise torch.OutOfMemoryError(message)
        address = c.alloc(n)
        self.driver_sees()
        return address

    def release(self, address):
        self.cuda.free(address=address)
        self.driver_sees()


if SIMULATED:
    MEM = SimulatedMemory()
    DEVICE = torch.device("cpu")
    EMPTY, RELEASE = MEM.empty, MEM.release
else:
    MEM = None
    DEVICE = torch.device("cuda", 0)
    # A C callable: the line that calls EMPTY is the innermost Python frame of the request.
    EMPTY = functools.partial(torch.empty, dtype=torch.uint8, device=DEVICE)

    def RELEASE(tensor):
        """The caller drops its reference: the tensor's block goes back to the cache."""


def synchronize():
    if not SIMULATED:
        torch.cuda.synchronize()


class Net(torch.nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        layers = []
        for _ in range(depth):
            layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
        self.body = torch.nn.Sequential(*layers)
        self.spike = 0
        self.at_spike = None

    def forward(self, x):
        h = self.body(x)
        if self.spike:
            s = EMPTY(self.spike)  # SPIKE
            self.at_spike = torch.cuda.memory_allocated()
            hold("in-spike", spike_bytes=self.spike, allocated_at_spike=self.at_spike)
            RELEASE(s)
            s = None
        return h


class Trainer:
    def __init__(self, width, depth, batch):
        torch.manual_seed(0)
        if MEM:
            MEM.start()
        self.model = Net(width, depth).to(DEVICE)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-4)
        self.x = torch.randn(batch, width, device=DEVICE)
        self.steps = 0  # optimizer steps taken: what the writer's hook counts

    def kinds(self):
        """What `vramscope._torch_categories` must find on the GPU: the parameters and Adam's
        state, each storage as its 512-byte allocator block (Adam's `step` counts stay on the
        CPU). The gradients are gone by the time a note is written (`zero_grad`)."""

        def on_gpu(tensors):
            return sum(round_up(t.untyped_storage().nbytes()) for t in tensors if t.is_cuda)

        state = [v for s in self.optimizer.state.values() for v in s.values() if torch.is_tensor(v)]
        return {"parameters": on_gpu(self.model.parameters()), "optimizer_state": on_gpu(state)}

    def adam_step(self):
        states = [s for s in self.optimizer.state.values() if "step" in s]
        return int(states[0]["step"]) if states else 0

    def step(self, before_optimizer=None):
        activations = EMPTY(SIM_ACTIVATIONS) if MEM else None
        loss = self.model(self.x).square().mean()
        loss.backward()
        if MEM:
            RELEASE(activations)
        if before_optimizer:
            before_optimizer()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.steps += 1
        loss.item()
        synchronize()


TRAINER = None


def torch_figures():
    synchronize()
    s = torch.cuda.memory_stats()
    free, total = torch.cuda.mem_get_info()
    return {
        "allocated": s["allocated_bytes.all.current"],
        "allocated_peak": s["allocated_bytes.all.peak"],
        "reserved": s["reserved_bytes.all.current"],
        "reserved_peak": s["reserved_bytes.all.peak"],
        "num_ooms": s["num_ooms"],
        "num_alloc_retries": s["num_alloc_retries"],
        "mem_get_info_free": free,
        "mem_get_info_total": total,
    }


def note(name, **extra):
    """A record for the checker, without waiting."""
    if not HOLD_DIR:
        return
    record = {"name": name, "pid": os.getpid(), "time_ms": time.time() * 1000.0, "steps": TRAINER.steps if TRAINER else 0}
    if TRAINER:
        record["adam_step"] = TRAINER.adam_step()
        record["kinds"] = TRAINER.kinds()
    record["torch"] = torch_figures()
    record.update(extra)
    path = os.path.join(HOLD_DIR, name + ".json")
    with open(path + ".tmp", "w") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)


def hold(name, **extra):
    """Writes the record, then holds still until the checker says go (at most 120 s)."""
    note(name, **extra)
    if not HOLD_DIR:
        return
    go = os.path.join(HOLD_DIR, name + ".go")
    deadline = time.monotonic() + 120
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.02)


def story():
    global TRAINER
    TRAINER = t = Trainer(width=1024, depth=4, batch=512)
    for step in range(FATAL + 1):
        if step == WARM:
            hold("warm")
        if step == SPIKE:
            free, _ = torch.cuda.mem_get_info()
            t.model.spike = round_down(free // 4)
            t.step(before_optimizer=lambda: time.sleep(0.3))
            t.model.spike = 0
            hold("after-spike", spike_step=t.steps - 1)
            continue
        if step == CAUGHT:
            _, total = torch.cuda.mem_get_info()
            request = round_up(total)
            try:
                big = EMPTY(request)  # CAUGHT-OOM
                RELEASE(big)
            except torch.OutOfMemoryError as e:
                print("batch %d skipped: %s" % (step, str(e).split(".")[0]), flush=True)
                t.optimizer.zero_grad(set_to_none=True)
                hold("caught", request=request)
                continue
        if step == FATAL:
            _, total = torch.cuda.mem_get_info()
            request = round_up(total * 5 // 4)
            note("fatal", request=request)
            big = EMPTY(request)  # FATAL-OOM
            RELEASE(big)
        t.step()


def timing(steps):
    t = Trainer(width=2048 if not SIMULATED else 128, depth=4, batch=4096 if not SIMULATED else 64)
    times = []
    for i in range(steps):
        start = time.perf_counter()
        t.step()
        times.append(time.perf_counter() - start)
    times = sorted(times[steps // 5 :])
    print(json.dumps({"median_us": 1e6 * times[len(times) // 2], "steps": len(times), "min_us": 1e6 * times[0]}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "story":
        story()
    else:
        timing(int(sys.argv[2]))
