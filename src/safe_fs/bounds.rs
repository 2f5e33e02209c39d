//! The bound of every kind of input vramscope reads from outside, stated once: the size (and
//! where it applies, the count) checked before the whole is read. docs/threat-model.md lists
//! the same table; a new kind of input gets its line here first.

use super::read::Bound;

/// A configuration file: a few dozen settings.
pub const CONFIG: Bound = Bound {
    what: "configuration file",
    max_bytes: 1 << 20,
};

/// A process's own `/proc/PID/stat` or `status` (a few kilobytes; the kernel writes them).
pub const PROC_FILE: Bound = Bound {
    what: "/proc file",
    max_bytes: 64 << 10,
};

/// The attach agent's answer: one line in the target's /tmp, where its user could put
/// anything else under that name.
pub const AGENT_STATUS: Bound = Bound {
    what: "attach agent's answer",
    max_bytes: 16 << 10,
};
