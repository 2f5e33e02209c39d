#!/bin/sh
# compare.sh PICKLE...: memory_viz's timeline peak (peak.mjs) against `vramscope sites`, one
# JSON line per file. MEMORY_VIZ_JS names PyTorch's torch/utils/viz/MemoryViz.js (README.md
# here says where to get it); VRAMSCOPE the binary (default: the release build, else debug).
HERE=$(dirname "$0")
ROOT=$HERE/../..
VIZ=${MEMORY_VIZ_JS:-$HERE/MemoryViz.js}
VS=${VRAMSCOPE:-$ROOT/target/release/vramscope}
[ -x "$VS" ] || VS=$ROOT/target/debug/vramscope
for f in "$@"; do
  node "$HERE/peak.mjs" "$VIZ" "$f" --top 50 --latest > /tmp/memviz.$$.json || exit 1
  "$VS" sites "$f" --json --top 50 > /tmp/vs.$$.json 2>/tmp/vs.$$.err || { echo "$f: vramscope failed: $(cat /tmp/vs.$$.err)"; continue; }
  node -e '
    const fs = require("fs");
    const m = JSON.parse(fs.readFileSync(process.argv[1]));
    const v = JSON.parse(fs.readFileSync(process.argv[2]));
    const t = m.timeline_unsummarised || m.timeline;
    const norm = s => s.startsWith("<block was allocated before") ? "<allocated before the history>" : s;
    const mg = Object.fromEntries(t.groups.map(g => [norm(g.site), [g.bytes, g.count]]));
    const vg = Object.fromEntries(v.sites.map(s => [s.file ? `${s.file}:${s.line} ${s.function}` : s.function, [s.bytes, s.blocks]]));
    const keys = [...new Set([...Object.keys(mg), ...Object.keys(vg)])];
    const diff = keys.filter(k => JSON.stringify(mg[k]) !== JSON.stringify(vg[k]));
    console.log(JSON.stringify({
      file: process.argv[3],
      memviz_max_size: t.max_size, memviz_peak_time_us: t.peak_entry && t.peak_entry.time_us,
      memviz_alive: [t.alive_count, t.alive_bytes], memviz_peak_reached_times: t.peak_reached_times, default_agrees_unsummarised: m.default_and_unsummarised_agree,
      vramscope_total_bytes: v.total_bytes, vramscope_time_us: v.time_us, vramscope_blocks: v.blocks,
      vramscope_exactness: v.exactness && v.exactness.kind,
      peak_bytes_agree: t.max_size === v.total_bytes,
      peak_time_agree: (t.peak_entry && t.peak_entry.time_us) === v.time_us,
      groups_agree: diff.length === 0,
      group_diffs: diff.map(k => ({site: k, memviz: mg[k] || null, vramscope: vg[k] || null})),
      memviz_top: t.groups.slice(0, 4).map(g => [norm(g.site), g.bytes, g.count]),
    }));
  ' /tmp/memviz.$$.json /tmp/vs.$$.json "$f"
done
rm -f /tmp/memviz.$$.json /tmp/vs.$$.json /tmp/vs.$$.err
