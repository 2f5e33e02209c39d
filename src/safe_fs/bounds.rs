//! The bound of every kind of input vramscope reads from outside, stated once: the size (and
//! where it applies, the count) checked before the whole is read. docs/threat-model.md lists
//! the same table; a new kind of input gets its line here first.

use super::read::Bound;

/// A configuration file: a few dozen settings.
pub const CONFIG: Bound = Bound {
    what: "configuration file",
    max_bytes: 1 << 20,
};
