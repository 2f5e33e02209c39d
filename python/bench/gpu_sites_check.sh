#!/bin/bash
# Allocation sites on a real GPU (issue 14 §4), from the repository's root on a machine with
# an NVIDIA GPU, PyTorch and a built vramscope:
#
#     VRAMSCOPE_BIN=target/release/vramscope OUT=/tmp/out bash python/bench/gpu_sites_check.sh
#
# 1. Step time of python/bench/gpu_sites_transformer.py alone, under `vramscope run`, and
#    under `vramscope run --sites` (with one requested dump, timed); the cost the allocator's
#    history adds per allocation.
# 2. The same model under `vramscope run --sites`, recorded, until an OOM kills it; the report.
# 3. `vramscope sites` on every snapshot written (peak, request, OOM), and PyTorch's own
#    torch/cuda/_memory_viz.py totals for the same files. The snapshots go to $OUT.
set -u
B=$(realpath "${VRAMSCOPE_BIN:-target/release/vramscope}")
W=python/bench/gpu_sites_transformer.py
O=${OUT:-/tmp/vramscope-gpu-check}
mkdir -p "$O"
export PYTHONUNBUFFERED=1 VRAMSCOPE_CONFIG=none
exec > >(tee "$O/log.txt") 2>&1
step() { echo; echo "=== $* ($(date +%T))"; }

step machine
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())'
"$B" --version
"$B" --once

step "1. step time: plain, vramscope run, vramscope run --sites"
python3 $W --steps 40 --label plain --alloc-bench 100000
for mode in run sites; do
    rm -rf /tmp/vs-$mode && mkdir -m 700 /tmp/vs-$mode
    flags=(); extra=()
    [ $mode = sites ] && flags=(--sites) && extra=(--request-snapshot)
    VRAMSCOPE_DIR=/tmp/vs-$mode "$B" run --no-monitor "${flags[@]}" -- \
        python3 $W --steps 40 --label $mode "${extra[@]}"
    echo "exit status $?"
done
ls -l /tmp/vs-sites

step "2. an OOM under --sites, recorded"
rm -rf /tmp/vs-oom && mkdir -m 700 /tmp/vs-oom
VRAMSCOPE_DIR=/tmp/vs-oom "$B" record -o /tmp/oom.jsonl --force --interval 200ms &
rec=$!
sleep 1
VRAMSCOPE_DIR=/tmp/vs-oom "$B" run --no-monitor --sites -- \
    python3 $W --steps 14 --oom-step 12 --label oom
echo "exit status $?"
sleep 1
kill -INT $rec
wait $rec
echo "record exit status $?"
ls -l /tmp/vs-oom
VRAMSCOPE_DIR=/tmp/vs-oom "$B" report /tmp/oom.jsonl

step "3. vramscope sites on each snapshot"
for f in /tmp/vs-sites/*.pickle /tmp/vs-oom/*.pickle; do
    [ -e "$f" ] || continue
    at=peak
    case $f in *-oom.pickle) at=oom ;; *-request.pickle) at=end ;; esac
    echo "--- $f ($at)"
    /usr/bin/time -f "sites: %e s, %M KB" "$B" sites "$f" --at $at
    "$B" sites "$f" --at $at --json > "$f.$at.json"
    [ $at = peak ] || "$B" sites "$f" --at peak
    [ $at = peak ] || "$B" sites "$f" --at peak --json > "$f.peak.json"
done
python3 - /tmp/vs-sites/*.pickle /tmp/vs-oom/*.pickle <<'EOF'
import pickle, sys
from torch.cuda import _memory_viz as viz
for path in sys.argv[1:]:
    snap = pickle.load(open(path, "rb"))
    lines = viz.memory(snap, format_flamegraph=lambda text: text).splitlines()
    total = lambda pred: sum(int(l.rsplit(" ", 1)[1]) for l in lines if pred(l))
    active = total(lambda l: ";active_allocated;" in l and not l.rsplit(" ", 1)[0].endswith("<gaps>"))
    entries = [l for l in viz.trace(snap).splitlines() if l.endswith(" entries")]
    print(f"memory_viz {path}: active requested {active} B, reserved {total(lambda l: True)} B, "
          f"trace {entries}, vramscope key {snap.get('vramscope', {}).get('reason')}")
EOF
step "4. the checks: the top site at the peak is the oversized line, and it is exact"
# The newest peak dump of each run (the first may be the weights reaching the GPU, before any
# step), the request dump's peak, and the OOM.
newest() { ls -v "$@" 2>/dev/null | tail -1; }
python3 - "$W" $(newest /tmp/vs-sites/*-peak.pickle.peak.json) /tmp/vs-sites/*-request.pickle.peak.json \
    $(newest /tmp/vs-oom/*-peak.pickle.peak.json) /tmp/vs-oom/*-oom.pickle.oom.json <<'EOF'
import json, sys
line = next(i + 1 for i, l in enumerate(open(sys.argv[1])) if l.rstrip().endswith("# OVERSIZED"))
for path in sys.argv[2:]:
    try:
        d = json.load(open(path))
    except OSError as e:
        print("FAIL", path, e)
        continue
    top = d["sites"][0] if d["sites"] else {}
    where = "%s:%s %s" % (top.get("file"), top.get("line"), top.get("function"))
    ok_site = (top.get("file") or "").endswith("gpu_sites_transformer.py") and top.get("line") == line
    if d["moment"] == "oom":
        oom = d["oom"] or {}
        print("OOM", path, "request", oom.get("requested"), "free", oom.get("device_free"), "top", where,
              "%.1f%%" % (100 * top.get("share", 0)), "|", oom.get("verdict"))
        continue
    exact = d["exactness"]["kind"] == "exact"
    print("PASS" if ok_site and exact else "FAIL", path, "top", where, "%.1f%%" % (100 * top.get("share", 0)),
          top.get("bytes"), "of", d["total_bytes"], "|", d["exactness"]["text"])
EOF
tar czf "$O/sites.tgz" -C /tmp vs-sites
tar czf "$O/oom.tgz" -C /tmp vs-oom oom.jsonl
ls -l "$O"
