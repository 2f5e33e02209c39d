"""A simulated training run for the OOM hunt's end-to-end test (tests/oom_hunt.rs), through
vramscope's explicit API on a 16 GiB GPU: 9 GiB steady, a 16 MiB-per-step leak, a 30 ms
spike to 12 GiB inside backward at step 40 (between two of the monitor's polls), and at
step 80 a 6 GiB request that fails inside forward with 2.7 GiB free (reported as the
allocator's observer would, then raised uncaught), which kills the job.

Waits for a line on stdin before the first step, so that the monitors are watching."""

import os
import sys
import time

import vramscope

GIB = 1 << 30
MIB = 1 << 20
UUID = os.environ["HUNT_UUID"]
TOTAL = 16 * GIB
OUTSIDE = 2 * GIB  # the CUDA context and libraries
STEP_S = float(os.environ.get("HUNT_STEP_S", "0.05"))


def report(allocated):
    vramscope.report(
        device=0,
        allocated=allocated,
        reserved=allocated + GIB,
        free=TOTAL - allocated - GIB - OUTSIDE,
        total=TOTAL,
        uuid=UUID,
    )


report(9 * GIB)
print("ready", flush=True)
sys.stdin.readline()
for step in range(81):
    base = 9 * GIB + step * 16 * MIB
    with vramscope.mark("forward"):
        report(base)
        time.sleep(STEP_S / 3)
        if step == 80:
            vramscope.oom(device=0, requested=6 * GIB, free=TOTAL - base - GIB - OUTSIDE)
            raise RuntimeError("CUDA out of memory. Tried to allocate 6.00 GiB")
    with vramscope.mark("backward"):
        if step == 40:
            report(12 * GIB)
            time.sleep(0.03)
        report(base + 512 * MIB)
        time.sleep(STEP_S / 3)
    with vramscope.mark("optimizer"):
        report(base)
        time.sleep(STEP_S / 3)
    vramscope.step()
