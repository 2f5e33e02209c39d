"""Writes a memory snapshot in the documented format (what torch.cuda.memory._snapshot()
returns, plus the "vramscope" key), with known sites, using the standard library only.

    python3 make_snapshot.py OUT MODE

MODE:
  peak   one device, a 4 GiB temporary at model.py:123 (attention) between two 1 GiB
         tensors that outlive it: the peak is 6 GiB, two-thirds of it the temporary; the
         recorded peak is 6 GiB, so the answer is exact.
  short  the same trace, but the allocator recorded a 7 GiB peak the ring no longer holds.
  oom    the same, then a 5 GiB request at model.py:200 (mlp) that fails: 2 GiB live,
         6 GiB cached but in a 4 GiB and a 2 GiB hole.
"""
import pickle
import sys

GIB = 1 << 30
BASE = 0x7F0000000000


def frames(filename, line, name):
    # What python stacks look like with context="alloc": the caller's frame first, torch's
    # own below it would follow; here the user's frame only.
    return [{"filename": filename, "line": line, "name": name}]


MODEL = "/home/user/proj/model.py"
TRAIN = "/home/user/proj/train.py"
TORCH_LINEAR = "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py"


def build(mode):
    a = (BASE, GIB, frames(MODEL, 10, "__init__"))
    b = (BASE + GIB, 4 * GIB, frames(MODEL, 123, "attention"))
    c = (BASE + 5 * GIB, GIB, frames(TRAIN, 50, "step"))
    trace = [
        {"action": "segment_alloc", "addr": BASE, "size": 8 * GIB, "stream": 0,
         "time_us": 1_000, "frames": frames(TRAIN, 5, "main")},
    ]
    t = 2_000
    for addr, size, fr in (a, b, c):
        trace.append({"action": "alloc", "addr": addr, "size": size, "stream": 0,
                      "time_us": t, "frames": fr})
        t += 1_000
    for action in ("free_requested", "free_completed"):
        trace.append({"action": action, "addr": b[0], "size": b[1], "stream": 0,
                      "time_us": t, "frames": []})
        t += 1_000
    oom = None
    if mode == "oom":
        # The failed request's Python stack, innermost first, as torch records it: torch's
        # own frames, then the program's; its site is model.py:200 (mlp).
        stack = ([{"filename": TORCH_LINEAR, "line": 125, "name": "forward"}]
                 + frames(MODEL, 200, "mlp") + frames(TRAIN, 60, "step"))
        trace.append({"action": "oom", "addr": 0, "size": 5 * GIB, "stream": 0,
                      "time_us": t, "device_free": GIB // 2, "frames": stack})
        oom = {"requested": 5 * GIB, "device_free": GIB // 2, "device_total": 9 * GIB}
    blocks = [
        {"address": a[0], "size": a[1], "requested_size": a[1], "state": "active_allocated",
         "frames": a[2]},
        {"address": b[0], "size": b[1], "requested_size": 0, "state": "inactive", "frames": []},
        {"address": c[0], "size": c[1], "requested_size": c[1], "state": "active_allocated",
         "frames": c[2]},
        {"address": BASE + 6 * GIB, "size": 2 * GIB, "requested_size": 0, "state": "inactive",
         "frames": []},
    ]
    segment = {
        "device": 0, "address": BASE, "total_size": 8 * GIB, "allocated_size": 2 * GIB,
        "active_size": 2 * GIB, "requested_size": 2 * GIB, "stream": 0,
        "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
        "frames": frames(TRAIN, 5, "main"), "blocks": blocks,
    }
    recorded_peak = 7 * GIB if mode == "short" else 6 * GIB
    return {
        "segments": [segment],
        "device_traces": [trace],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": ""},
        "vramscope": {
            "version": 1, "pid": 4242, "device": 0,
            "reason": {"oom": "oom", "short": "peak", "peak": "peak"}[mode],
            "peak_allocated": recorded_peak, "peak_time_us": 4_000,
            "allocated": 2 * GIB, "reserved": 8 * GIB, "step": 40, "phase": "forward",
            "max_entries": 1000, "history_owner": "vramscope", "oom": oom,
        },
    }


def main():
    out, mode = sys.argv[1], sys.argv[2]
    data = pickle.dumps(build(mode), protocol=4)
    with open(out, "wb") as f:
        f.write(data)
    print(len(data))


if __name__ == "__main__":
    main()
