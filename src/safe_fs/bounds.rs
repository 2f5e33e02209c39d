//! The bound of every kind of input vramscope reads from outside, stated once: the size (and
//! where it applies, the count) checked before the whole is read. docs/threat-model.md lists
//! the same table; a new kind of input gets its line here first.

use super::read::Bound;

/// A configuration file: a few dozen settings.
pub const CONFIG: Bound = Bound {
    what: "configuration file",
    max_bytes: 1 << 20,
};

// Inputs read from other hosts and from files a user names. Each reader takes its numbers
// from here: none keeps a copy of its own.

/// A `--targets-file`: one exporter address a line, comments allowed. 100,000 lines of
/// `http://host.domain:9400/metrics` fit; reading a FIFO or `/dev/zero` as one never ends.
pub const TARGETS_FILE: Bound = Bound {
    what: "targets file",
    max_bytes: 4 << 20,
};
/// The most targets one list names: each is scraped every refresh, so more is a mistake.
pub const MAX_TARGETS: usize = 10_000;

/// `cluster --ssh`: the most hosts one list names (each holds an ssh session and three
/// threads), one remote `--json --loop` line (eight GPUs with a thousand processes make
/// about 1.5 MB), and the last of ssh's stderr kept per host to say why it failed.
pub const MAX_SSH_HOSTS: usize = 256;
pub const SSH_DOCUMENT: usize = 16 << 20;
pub const SSH_STDERR_TAIL: usize = 8 << 10;

/// One exporter's `/metrics` page, scraped directly: dcgm-exporter's for eight GPUs is
/// about 100 KB, vramscope's with a thousand processes about 2 MB.
pub const METRICS_PAGE: Bound = Bound {
    what: "metrics page",
    max_bytes: 32 << 20,
};
/// The most samples kept from one page, of the families the view reads (the rest are only
/// scanned): a node of 8 GPUs with 500 processes serves about 4,000. Each kept sample costs
/// the view about 8 KB by the time it is shown, so a page over it is refused, said so,
/// rather than held.
pub const METRICS_PAGE_SAMPLES: usize = 20_000;

/// One answer of Prometheus's query API: a fleet of 2,048 ranks answers about 10 MiB.
pub const PROMETHEUS_ANSWER: Bound = Bound {
    what: "Prometheus answer",
    max_bytes: 64 << 20,
};
/// The most series one answer may hold (2,048 ranks answer about 20,000): counted as the
/// answer is decoded, and an answer over it is refused before more are built.
pub const PROMETHEUS_SERIES: usize = 200_000;
/// The most label pairs over all series of one answer (each is two strings when decoded).
pub const PROMETHEUS_LABELS: usize = 4_000_000;
/// The most points over all series of one range answer (the start's range queries ask for
/// 61 points a series).
pub const PROMETHEUS_POINTS: usize = 8_000_000;

/// A PyTorch memory snapshot (`vramscope sites FILE`, the monitor's and the report's reads
/// of what a writer announced): refused by its size on the descriptor and by its first two
/// bytes (a pickle's PROTO, protocol 2 to 5) before the whole is read. PyTorch's docs put
/// "several KB per entry" on a snapshot with deep stacks.
pub const SNAPSHOT: Bound = Bound {
    what: "memory snapshot",
    max_bytes: 1 << 30,
};
/// The most values (ints, strings, containers, memo references) a snapshot's pickle may make
/// the reader build, counted by the guard before any is built. A history of 1,000,000
/// entries is 15.3 million.
pub const SNAPSHOT_VALUES: u64 = 64_000_000;
/// Of those, the most that are each an allocation of their own when built (strings, bytes,
/// lists, dicts, tuples, sets): a 1,000,000-entry history has 1.3 million.
pub const SNAPSHOT_ALLOCATED: u64 = 8_000_000;
/// The most values a snapshot's pickle may store in its memo (1.3 million in a
/// 1,000,000-entry history).
pub const SNAPSHOT_MEMO: u64 = 8_000_000;
/// The most values on a pickle's stack at once, outside any container: Python's pickler
/// puts at most 1,000 items between a mark and the opcode that takes them, so a snapshot
/// nests 64 deep with room to spare; a pickle that pushes millions before one `APPENDS`
/// would make the guard and the crate hold all of them twice.
pub const SNAPSHOT_STACK: usize = 1 << 20;

/// A recording is streamed, never read whole (it may be longer than memory): each line is
/// read to at most this, and a longer one is an error naming it.
pub const RECORDING_LINE: usize = 16 << 20;
/// A recording's first line, its header.
pub const RECORDING_HEADER_LINE: usize = 64 << 10;
/// The largest zstd window a compressed recording may ask for (2^24 bytes: 16 MiB), so a
/// frame cannot make the decoder allocate more.
pub const RECORDING_ZSTD_WINDOW_LOG: u32 = 24;

/// A process's own `/proc/PID/stat` or `status` (a few kilobytes; the kernel writes them).
pub const PROC_FILE: Bound = Bound {
    what: "/proc file",
    max_bytes: 64 << 10,
};

/// A process's `/proc/PID/maps`: one line a mapping; a training job with CUDA and its
/// libraries maps a few thousand (a few hundred KB).
pub const PROC_MAPS: Bound = Bound {
    what: "/proc/PID/maps",
    max_bytes: 16 << 20,
};

/// A library attach reads symbols from (libc, libpython, a static python): libpython 3.13
/// is about 30 MB with its symbols.
pub const MAPPED_LIBRARY: Bound = Bound {
    what: "mapped library",
    max_bytes: 512 << 20,
};

/// The attach agent's answer: one line in the target's /tmp, where its user could put
/// anything else under that name.
pub const AGENT_STATUS: Bound = Bound {
    what: "attach agent's answer",
    max_bytes: 16 << 10,
};
