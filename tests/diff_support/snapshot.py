"""Writes a memory snapshot (the shape torch.cuda.memory._snapshot() returns, plus the
"vramscope" key) holding exactly the given blocks, all live at the dump: the peak is their
sum, each block allocated at its own site. Standard library only.

    python3 snapshot.py OUT BLOCKS_JSON

BLOCKS_JSON: [[filename, line, function, bytes], ...]; bytes a multiple of 512.
"""
import json
import pickle
import sys

BASE = 0x7F0000000000


def main():
    out, blocks = sys.argv[1], json.loads(sys.argv[2])
    total = sum(b[3] for b in blocks)
    trace = [{"action": "segment_alloc", "addr": BASE, "size": total, "stream": 0,
              "time_us": 1_000, "frames": []}]
    segment_blocks = []
    addr, t = BASE, 2_000
    for filename, line, name, size in blocks:
        frames = [{"filename": filename, "line": line, "name": name}]
        trace.append({"action": "alloc", "addr": addr, "size": size, "stream": 0,
                      "time_us": t, "frames": frames})
        segment_blocks.append({"address": addr, "size": size, "requested_size": size,
                               "state": "active_allocated", "frames": frames})
        addr += size
        t += 1_000
    segment = {
        "device": 0, "address": BASE, "total_size": total, "allocated_size": total,
        "active_size": total, "requested_size": total, "stream": 0,
        "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
        "frames": [], "blocks": segment_blocks,
    }
    snapshot = {
        "segments": [segment],
        "device_traces": [trace],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": ""},
        "vramscope": {
            "version": 1, "pid": 4242, "device": 0, "reason": "peak",
            "peak_allocated": total, "peak_time_us": t - 1_000,
            "allocated": total, "reserved": total, "step": 0, "phase": "",
            "max_entries": 100_000, "history_owner": "vramscope", "oom": None,
        },
    }
    data = pickle.dumps(snapshot, protocol=4)
    with open(out, "wb") as f:
        f.write(data)
    print(len(data))


if __name__ == "__main__":
    main()
