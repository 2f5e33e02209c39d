"""One rank of a simulated multi-node job for the cluster tests (tests/cluster_*.rs), through
vramscope's explicit API: it publishes RANK_ALLOC bytes allocated (and 1 GiB more reserved)
on its GPU RANK_UUID, takes RANK_STEPS training steps, says "ready", then obeys lines on
stdin:

    oom           an allocation of 6 GiB fails (reported as the allocator's observer would)
    alloc BYTES   allocated becomes BYTES (the peak follows when it rises)
    step          one more training step

answering each with "done". It ends when stdin closes. Rank, local rank, world size and job
id come from the usual RANK, LOCAL_RANK, WORLD_SIZE and SLURM_JOB_ID variables."""

import os
import sys

import vramscope

GIB = 1 << 30
UUID = os.environ["RANK_UUID"]
TOTAL = 80 * GIB

allocated = int(os.environ["RANK_ALLOC"])
peak = allocated


def report():
    vramscope.report(
        device=0,
        allocated=allocated,
        reserved=allocated + GIB,
        peak=peak,
        free=TOTAL - allocated - GIB,
        total=TOTAL,
        uuid=UUID,
    )


report()
for _ in range(int(os.environ.get("RANK_STEPS", "10"))):
    report()
    vramscope.step()
print("ready", flush=True)

for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    if words[0] == "oom":
        vramscope.oom(device=0, requested=6 * GIB, free=GIB)
    elif words[0] == "alloc":
        allocated = int(words[1])
        peak = max(peak, allocated)
        report()
    elif words[0] == "step":
        report()
        vramscope.step()
    print("done", flush=True)
