"""What counting memory by kind (`vramscope._torch_categories`) costs one step of the real
torch: for each model of the MemTracker tests, the µs one `measure` takes at a step boundary
(parameters and optimizer state already counted: only the gradients and the check that
nothing changed), beside the µs of the step itself on this machine's CPU, and the share.

    $VRAMSCOPE_REAL_PYTHON python/bench/bench_categories.py

A CPU step of these small models takes milliseconds; a GPU step of a real model takes more,
so the share here is an upper bound for the same parameter count.
"""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import torch  # noqa: E402

import test_real_torch_categories as models  # noqa: E402
from vramscope import _torch_categories as C  # noqa: E402

STEPS = 30


def step(model, optimizer):
    model(model.batch()).float().sum().backward()
    optimizer.step()


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    print("categories' cost per step (%d steps each, median):" % STEPS)
    for model_type in (models.Mlp, models.TiedLm, models.Transformer, models.Cnn, models.Checkpointed):
        model = model_type()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        categories = C.Categories(torch)
        step(model, optimizer)
        categories.measure([optimizer], [model])
        optimizer.zero_grad(set_to_none=True)
        step_us, measure_us = [], []
        for _ in range(STEPS):
            t0 = time.perf_counter()
            step(model, optimizer)
            t1 = time.perf_counter()
            categories.measure([optimizer], [model])
            t2 = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            step_us.append((t1 - t0) * 1e6)
            measure_us.append((t2 - t1) * 1e6)
        step_us.sort()
        measure_us.sort()
        s, m = step_us[STEPS // 2], measure_us[STEPS // 2]
        params = sum(1 for _ in model.parameters())
        print(
            "  %-12s %3d parameters: measure %7.1f µs, step %9.1f µs: %.2f %% of the step"
            % (model_type.__name__, params, m, s, 100.0 * m / s)
        )


if __name__ == "__main__":
    main()
