#!/usr/bin/env node
// peak.mjs: what PyTorch's memory_viz page ("Active Memory Timeline") shows for a
// CUDA memory snapshot pickle: the timeline's peak and the allocations alive at it.
//
// Usage: node peak.mjs [MemoryViz.js] SNAPSHOT.pickle [--device N] [--top N] [--latest]
//   --latest: when the peak height is reached several times, describe the last time
//             (default: the first time)
//
// No code of MemoryViz.js is copied here: the file is read at run time, only its CDN
// `import ... from "https://..."` lines are replaced by a do-nothing stub (the page's
// DOM set-up at the bottom of the module then runs harmlessly against the stub), an
// `export {...}` line is appended for the functions this tool calls, and the patched
// text is imported from a temporary .mjs file. The pickle is read with the page's own
// `unpickle`, annotated with its own `annotate_snapshot` (as `unpickle_and_annotate`
// does), and the timeline is the page's own `process_alloc_data(snapshot, device,
// plot_segments=false, max_entries)` as `create_trace_view` calls it.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {fileURLToPath, pathToFileURL} from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));

function usage(msg) {
  if (msg) console.error(`memviz_peak: ${msg}`);
  console.error(
    'usage: node peak.mjs [MemoryViz.js] SNAPSHOT.pickle [--device N] [--top N] [--latest]',
  );
  process.exit(2);
}

// ---------------------------------------------------------------- arguments
const positional = [];
let deviceArg = null;
let top = 20;
let latest = false;
{
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--device') deviceArg = Number(argv[++i]);
    else if (a.startsWith('--device=')) deviceArg = Number(a.slice(9));
    else if (a === '--top') top = Number(argv[++i]);
    else if (a.startsWith('--top=')) top = Number(a.slice(6));
    else if (a === '--latest') latest = true;
    else if (a === '-h' || a === '--help') usage();
    else if (a.startsWith('--')) usage(`unknown option ${a}`);
    else positional.push(a);
  }
  if (deviceArg !== null && !Number.isInteger(deviceArg)) usage('--device needs an integer');
  if (!Number.isInteger(top) || top < 1) usage('--top needs a positive integer');
}
let vizPath;
let picklePath;
if (positional.length === 2) [vizPath, picklePath] = positional;
else if (positional.length === 1) {
  vizPath = path.join(HERE, 'MemoryViz.js');
  picklePath = positional[0];
} else usage();

// ---------------------------------------------------------------- load MemoryViz.js
// A stub that absorbs any use: every property, call and `new` gives the stub again.
function makeStub() {
  const target = function () {};
  let proxy;
  const handler = {
    get(_t, prop) {
      if (prop === Symbol.toPrimitive) return () => 0;
      if (prop === 'then') return undefined; // never look like a promise
      if (prop === Symbol.iterator) return function* () {};
      if (prop === 'toString' || prop === 'valueOf') return () => '';
      return proxy;
    },
    apply() {
      return proxy;
    },
    construct() {
      return proxy;
    },
    set() {
      return true;
    },
    has() {
      return false;
    },
  };
  proxy = new Proxy(target, handler);
  return proxy;
}

const WANTED = [
  'unpickle',
  'annotate_snapshot',
  'process_alloc_data',
  'format_frames',
  'frameFilter',
  'create_trace_view',
];

async function loadMemoryViz(file) {
  const abs = path.resolve(file);
  let text = fs.readFileSync(abs, 'utf8');
  const stubbed = [];
  // `import X from "https://..."`, `import * as X from ...`, `import {a, b as c} from ...`
  const importRe = /^[ \t]*import\s+([\s\S]*?)\s+from\s+(["'])(https?:\/\/[^"']*)\2\s*;?/gm;
  text = text.replace(importRe, (_m, clause, _q, url) => {
    stubbed.push(url);
    const decls = [];
    clause = clause.trim();
    const star = clause.match(/^\*\s+as\s+([\w$]+)$/);
    if (star) {
      decls.push(`const ${star[1]} = globalThis.__memviz_stub;`);
    } else {
      const m = clause.match(/^(?:([\w$]+)\s*,?\s*)?(?:\{([\s\S]*)\})?$/);
      if (!m) throw new Error(`cannot stub import clause: ${clause}`);
      if (m[1]) decls.push(`const ${m[1]} = globalThis.__memviz_stub;`);
      if (m[2]) {
        for (const spec of m[2].split(',').map(s => s.trim()).filter(Boolean)) {
          const parts = spec.split(/\s+as\s+/);
          decls.push(`const ${parts[parts.length - 1].trim()} = globalThis.__memviz_stub;`);
        }
      }
    }
    return decls.join(' ');
  });
  // Relative imports (later versions split the pure functions into ./process_alloc_data.js):
  // resolve them beside MemoryViz.js.
  const dir = path.dirname(abs);
  text = text.replace(
    /(\bfrom\s+)(["'])(\.{1,2}\/[^"']+)\2/g,
    (_m, pre, q, rel) => `${pre}${q}${pathToFileURL(path.resolve(dir, rel)).href}${q}`,
  );
  const present = WANTED.filter(n =>
    new RegExp(`(function\\s+${n}\\s*\\(|\\bimport\\s*\\{[^}]*\\b${n}\\b)`).test(text),
  );
  for (const n of ['unpickle', 'annotate_snapshot', 'process_alloc_data']) {
    if (!present.includes(n)) throw new Error(`${file} has no function ${n}`);
  }
  // Do not re-export what the module already exports.
  const toExport = present.filter(
    n => !new RegExp(`export\\s+(async\\s+)?function\\s+${n}\\b`).test(text),
  );
  text += `\nexport {${toExport.join(', ')}};\n`;

  globalThis.__memviz_stub = makeStub();
  for (const g of ['window', 'document', 'event']) {
    if (!(g in globalThis)) globalThis[g] = globalThis.__memviz_stub;
  }
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'memviz-'));
  const tmpFile = path.join(tmp, 'MemoryViz.patched.mjs');
  fs.writeFileSync(tmpFile, text);
  // The page logs the whole snapshot and fragmentation figures with console.log: keep
  // stdout for our JSON.
  const log = console.log;
  console.log = () => {};
  try {
    const mod = await import(pathToFileURL(tmpFile).href);
    return {mod, stubbed, log, source: text};
  } finally {
    fs.rmSync(tmp, {recursive: true, force: true});
  }
}

// The default `max_entries` of create_trace_view (the page's "Detail" slider start).
function defaultMaxEntries(source) {
  const m = source.match(/function\s+create_trace_view\s*\([^)]*?max_entries\s*=\s*(\d+)/);
  return m ? Number(m[1]) : null;
}

// ---------------------------------------------------------------- helpers
function readSnapshot(mod, file) {
  const buf = fs.readFileSync(file);
  // unpickle builds Uint8Arrays over (buffer, offset): hand it an ArrayBuffer of its own.
  const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
  const snapshot = mod.unpickle(ab);
  mod.annotate_snapshot(snapshot); // as unpickle_and_annotate does
  return snapshot;
}

// The devices the page's GPU selector offers (snapshot_change), in order.
function pageDevices(snapshot) {
  const hasSegments = {};
  for (const s of snapshot.segments) hasSegments[s.device] = true;
  const out = [];
  for (const [i, trace] of snapshot.device_traces.entries()) {
    if (trace.length > 0 || i in hasSegments) out.push(i);
  }
  return out;
}

// context_for_id's text: "Addr: b<hex>_<version>, Size: ... allocation[, stream S]
// [\nalloc not recorded, stack trace for free:]\n<format_frames>"
function parseContext(text) {
  const lines = text.split('\n');
  const head = lines.shift();
  const am = head.match(/^Addr: ([bs])([0-9a-f]+)_(\d+)/);
  let allocRecorded = true;
  if (lines[0] === 'alloc not recorded, stack trace for free:') {
    allocRecorded = false;
    lines.shift();
  }
  const frames = [];
  for (const l of lines) {
    const fm = l.match(/^(.*?):(-?\d+):(.*)$/);
    if (fm) frames.push({filename: fm[1], line: Number(fm[2]), name: fm[3], text: l});
    else frames.push({filename: null, line: null, name: null, text: l}); // <repeats n times>, <block was allocated ...>
  }
  return {
    addr: am ? BigInt('0x' + am[2]) : null,
    addrText: am ? `${am[1]}${am[2]}_${am[3]}` : null,
    version: am ? Number(am[3]) : null,
    allocRecorded,
    frames,
  };
}

// Frames of torch, Python's standard library, and native code are the machinery; the
// group of an allocation is its first other frame, innermost first.
function isMachinery(filename) {
  if (filename === null) return true;
  if (filename.startsWith('<') || !filename.endsWith('.py')) return true;
  const parts = filename.split(/[\\/]/);
  if (parts.some(c => c === 'torch' || c === 'functorch' || c === 'torchgen')) return true;
  const i = parts.findIndex(c => /^python\d[\d.]*$/.test(c));
  if (i >= 0) return !parts.slice(i + 1).some(c => c === 'site-packages' || c === 'dist-packages');
  return false;
}

function groupKey(frames) {
  const real = frames.filter(f => f.filename !== null);
  const user = real.find(f => !isMachinery(f.filename));
  if (user) return `${user.filename}:${user.line} ${user.name}`;
  if (real.length > 0) return `${real[0].filename}:${real[0].line} ${real[0].name} (machinery only)`;
  return frames.length > 0 ? frames[0].text : '<no frames>';
}

// ---------------------------------------------------------------- the timeline
function analyse(mod, snapshot, device, maxEntries, latest) {
  const data = mod.process_alloc_data(snapshot, device, false, maxEntries);
  const maxAtTime = data.max_at_time;
  const maxSize = data.max_size;
  // The page's y axis runs to max_size (the most memory after any alloc/free action);
  // max_at_time holds the stacked height for every x step. The peak step: the first x
  // where the stacked height reaches max_size.
  let maxAtTimeMax = 0;
  for (const v of maxAtTime) maxAtTimeMax = Math.max(maxAtTimeMax, v);
  const peakValue = maxAtTime.includes(maxSize) ? maxSize : maxAtTimeMax;
  // The stretches of steps at the peak height: the page draws the same height each time the
  // peak is reached again; --latest takes the last stretch (vramscope's "latest maximum").
  const runs = [];
  for (let i = 0; i < maxAtTime.length; i++) {
    if (maxAtTime[i] === peakValue && (i === 0 || maxAtTime[i - 1] !== peakValue)) runs.push(i);
  }
  const peakStep = runs.length === 0 ? -1 : latest ? runs[runs.length - 1] : runs[0];

  // Alive at x = peakStep: a drawn polygon spans [timesteps[0], timesteps.at(-1)); the
  // summarized band's height at x is its size at the last advance at or before x.
  const sm = data.summarized_mem;
  const polys = data.allocations_over_time.filter(d => d.elem !== 'summarized');
  const alive = polys.filter(
    d => d.timesteps[0] <= peakStep && peakStep < d.timesteps[d.timesteps.length - 1],
  );
  let summarizedAtPeak = 0;
  for (let j = 0; j < sm.timesteps.length && sm.timesteps[j] <= peakStep; j++) {
    summarizedAtPeak = sm.size[j];
  }
  const aliveBytes = alive.reduce((s, d) => s + d.size, 0);

  const traceEntries = snapshot.device_traces[device] || [];
  const elements = alive.map(d => {
    const ctx = parseContext(data.context_for_id(d.elem));
    // Where the page took the element from (process_alloc_data): an alloc trace entry, a
    // free whose alloc the trace lost, or a block of the segment dump with no alloc entry.
    let source = 'free_only';
    if (ctx.allocRecorded) {
      const inTrace = traceEntries.some(
        t => t.action === 'alloc' && ctx.addr !== null && BigInt(t.addr) === ctx.addr &&
          t.version === ctx.version,
      );
      source = inTrace ? 'trace_alloc' : 'segment_snapshot';
    }
    return {elem: d.elem, size: d.size, from_step: d.timesteps[0], source, ...ctx};
  });

  // Which trace entry made the peak: the drawn element whose polygon starts at the peak step
  // (the stacked height is recorded just after an alloc is added).
  let peakEntry = null;
  const starter = elements.find(e => e.from_step === peakStep && e.allocRecorded);
  if (starter && starter.addr !== null) {
    const t = traceEntries.find(
      t =>
        t.action === 'alloc' && BigInt(t.addr) === starter.addr && t.version === starter.version,
    );
    if (t) {
      peakEntry = {
        trace_index: t.idx, // index in the page's (free-elided) event list
        action: t.action,
        addr: '0x' + BigInt(t.addr).toString(16),
        size: t.size,
        time_us: t.time_us ?? null,
      };
    }
  }

  const groups = new Map();
  for (const e of elements) {
    const k = groupKey(e.frames);
    const g = groups.get(k) || {site: k, bytes: 0, count: 0};
    g.bytes += e.size;
    g.count += 1;
    groups.set(k, g);
  }
  const groupList = [...groups.values()].sort((a, b) => b.bytes - a.bytes || (a.site < b.site ? -1 : 1));
  const total = aliveBytes || 1;
  for (const g of groupList) g.share = Number((g.bytes / total).toFixed(4));

  elements.sort((a, b) => b.size - a.size);
  return {
    max_entries: maxEntries,
    elements_length: data.elements_length,
    max_size: maxSize,
    max_at_time_max: maxAtTimeMax,
    timeline_steps: maxAtTime.length,
    peak_reached_times: runs.length,
    peak_which: latest ? 'latest' : 'first',
    peak_step: peakStep,
    peak_entry: peakEntry,
    alive_count: alive.length,
    alive_bytes: aliveBytes,
    summarized_bytes_at_peak: summarizedAtPeak,
    check_alive_plus_summarized_equals_peak: aliveBytes + summarizedAtPeak === maxAtTime[peakStep],
    groups_total: groupList.length,
    groups: groupList.slice(0, top),
    elements: elements.slice(0, top).map(e => ({
      size: e.size,
      addr: e.addrText,
      source: e.source,
      from_step: e.from_step,
      group: groupKey(e.frames),
      frames: e.frames.slice(0, 8).map(f => f.text),
    })),
  };
}

// ---------------------------------------------------------------- main
const {mod, stubbed, log, source} = await loadMemoryViz(vizPath);
const pageDefault = defaultMaxEntries(source) ?? 15000;
const HUGE = Number.MAX_SAFE_INTEGER;

let snapshot;
try {
  snapshot = readSnapshot(mod, picklePath);
} catch (e) {
  // e.g. "Unhandled version 5": the page's unpickler takes pickle protocols 2-4 only, so the
  // page itself could not open this file either.
  console.error(`memviz_peak: MemoryViz.js could not read ${picklePath}: ${e.message}`);
  process.exit(1);
}
const devices = pageDevices(snapshot);
const device = deviceArg ?? (devices.length > 0 ? devices[0] : 0);
if (!snapshot.device_traces[device] && !snapshot.segments.some(s => s.device === device)) {
  console.error(`memviz_peak: device ${device} has neither a trace nor segments (page offers ${JSON.stringify(devices)})`);
  process.exit(1);
}
if (!snapshot.device_traces[device]) snapshot.device_traces[device] = [];

const byDefault = analyse(mod, snapshot, device, pageDefault, latest);
// Fresh snapshot for the second run, so nothing one run did can leak into the other.
snapshot = readSnapshot(mod, picklePath);
if (!snapshot.device_traces[device]) snapshot.device_traces[device] = [];
const unsummarised = analyse(mod, snapshot, device, HUGE, latest);

const same =
  byDefault.max_size === unsummarised.max_size &&
  byDefault.peak_step === unsummarised.peak_step &&
  JSON.stringify(byDefault.groups) === JSON.stringify(unsummarised.groups) &&
  byDefault.summarized_bytes_at_peak === 0;

const out = {
  memoryviz: path.resolve(vizPath),
  snapshot: path.resolve(picklePath),
  stubbed_imports: stubbed,
  device,
  devices_offered: devices,
  size_measure: 'trace entry size (requested bytes; segment blocks use requested_size)',
  page_default_max_entries: pageDefault,
  default_and_unsummarised_agree: same,
  ...(same
    ? {timeline: unsummarised}
    : {timeline: byDefault, timeline_unsummarised: unsummarised}),
};
log(JSON.stringify(out, (_k, v) => (typeof v === 'bigint' ? v.toString() : v), 1));
