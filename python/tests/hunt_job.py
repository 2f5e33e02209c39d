"""A training job for `vramscope run` on a machine without a GPU: the real torch package and
its real optimizer, with only the driver simulated (`_simulated_cuda`), and no line of
vramscope in it (the zero-code path: `vramscope run` injects the writer).

What it does, step by step (every figure is the simulated allocator's, so known exactly):
- 2 GiB of weights, allocated once;
- each step: 3 GiB of activations in `forward`, a 5 GiB temporary in `backward` (the step's
  peak, between two polls), both freed, and 16 MiB kept for good (the leak); then the real
  `torch.optim.SGD.step()`, which ends the step for the writer's optimizer hook. The
  allocator keeps what it reserved (its cache);
- at batch CAUGHT (60), in `backward`, a 7 GiB temporary does not fit in the free memory
  (4.08 GiB) nor in the cache (4.98 GiB, in pieces): the allocator retries, runs its OOM
  observers and raises torch.OutOfMemoryError, which the job catches, skipping the batch
  (so the optimizer, and the writer's steps, are one behind the batch from there on);
- at batch FATAL (89), in `backward`, a 10 GiB temporary fails the same way, uncaught:
  3.64 GiB free and 4.98 GiB cached are 1.38 GiB short of it.

The device NVML would show is the simulated one: the job rewrites the fake NVML's scenario
($FAKE_NVML_SCENARIO) after every change, listing its own pid with what the driver would
count for it, the allocator's reserved plus 1 GiB of CUDA context (the simulated
cudaMemGetInfo says the same). Usage: python hunt_job.py [STEP_SECONDS], or `python hunt_job.py idle SCENARIO` to write the
scenario of the idle GPU (before the job starts, so that vramscope finds the GPU).
"""

import json
import os
import sys
import time

GIB = 1 << 30
MIB = 1 << 20
TOTAL = 16 * GIB
CONTEXT = GIB
CAUGHT, FATAL, LEAK = 60, 89, 16 * MIB
# What the simulated device properties give (`_simulated_cuda`: bytes 0..15), as a driver
# gives NVML and CUDA the same UUID.
UUID = "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"



def write_scenario(path, pid, used):
    """The fake NVML's scenario: the GPU with `used` bytes held, by `pid` when given."""
    processes = [{"pid": pid, "used_memory": used}] if pid else []
    scenario = {
        "devices": [
            {
                "name": "Tesla T4",
                "uuid": UUID,
                "pci_bus_id": "00000000:18:00.0",
                "memory_total": TOTAL,
                "memory_reserved": 0,
                "max_sm_clock": 1590,
                "max_mem_clock": 5001,
                "power_limit": 70000,
                "timeline": [
                    {"t": 0, "memory_used": used, "gpu_util": 97, "mem_util": 60, "temperature": 71, "power": 68000, "sm_clock": 1590, "mem_clock": 5001}
                ],
                "processes": [{"t": 0, "compute": processes}],
            }
        ]
    }
    tmp = path + ".%d.tmp" % os.getpid()
    with open(tmp, "w") as f:
        json.dump(scenario, f)
    os.replace(tmp, path)


if sys.argv[1:2] == ["idle"]:
    write_scenario(sys.argv[2], None, 0)
    sys.exit(0)

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _simulated_cuda import SimulatedCuda  # noqa: E402

cuda = SimulatedCuda(torch, total=TOTAL).install(initialised=False)


def driver_sees():
    """This process holds what its allocator reserved and the context."""
    used = cuda.stats["reserved_bytes"]["all"]["current"] + CONTEXT
    write_scenario(os.environ["FAKE_NVML_SCENARIO"], os.getpid(), used)


def oom_message(requested):
    """PyTorch's message for a request that did not fit, with the allocator's figures."""
    free = cuda._free()
    reserved = cuda.stats["reserved_bytes"]["all"]["current"]
    allocated = cuda.stats["allocated_bytes"]["all"]["current"]
    return (
        "CUDA out of memory. Tried to allocate %.2f GiB. GPU 0 has a total capacity of %.2f GiB "
        "of which %.2f GiB is free. Of the allocated memory %.2f GiB is allocated by PyTorch, "
        "and %.2f GiB is reserved by PyTorch but unallocated."
        % (requested / GIB, TOTAL / GIB, free / GIB, allocated / GIB, (reserved - allocated) / GIB)
    )


def main():
    step_seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 0.05
    cuda.initialise()  # the driver is up: the writer's queued start runs now
    model = torch.nn.Linear(8, 8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    weights = cuda.alloc(2 * GIB)
    driver_sees()
    kept = []
    for step in range(FATAL + 1):
        activations = cuda.alloc(3 * GIB)
        driver_sees()
        time.sleep(step_seconds / 2)
        try:
            if step in (CAUGHT, FATAL):
                # What the caching allocator does when a request does not fit: it retries
                # (its cache is in pieces none large enough, so it keeps it), runs its OOM
                # observers, and raises with its message.
                request = 7 * GIB if step == CAUGHT else 10 * GIB
                cuda.stats["num_alloc_retries"] += 1
                message = oom_message(request)
                cuda.fail(request)  # the backward's temporary that does not fit
                raise torch.OutOfMemoryError(message)
            temporary = cuda.alloc(5 * GIB)
            driver_sees()
            loss = model(torch.ones(8)).sum()
            loss.backward()
            cuda.free(address=temporary)
        except torch.OutOfMemoryError as e:
            if step == FATAL:
                raise
            print("batch %d skipped: %s" % (step, str(e).split(".")[0]), flush=True)
            cuda.free(address=activations)
            optimizer.zero_grad()
            continue
        cuda.free(address=activations)
        kept.append(cuda.alloc(LEAK))
        optimizer.step()
        optimizer.zero_grad()
        driver_sees()
        time.sleep(step_seconds / 2)
    cuda.free(address=weights)


if __name__ == "__main__":
    main()
