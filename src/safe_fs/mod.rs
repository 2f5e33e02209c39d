//! Files by descriptor, for code that may run as root on a machine shared with users it does
//! not trust. Every privileged path (attach, the configuration file, the monitor log, clean,
//! `run --log`, recordings, snapshot and channel reads) goes through here.
//!
//! The rule (the threat model in docs/threat-model.md): **root never works by path in a place
//! a user controls.** A check on a path and a later use of the same path name two different
//! things to a user who swaps a symlink or renames a folder in between. So:
//! - a directory is opened once (`O_DIRECTORY | O_NOFOLLOW`, one component at a time:
//!   [`walk`]), its owner and mode are checked on that descriptor ([`Trust`]), and everything
//!   after is relative to it ([`Dir`]: `openat`, `mkdirat`, `unlinkat`, `fchownat`,
//!   `renameat`, each refusing a symlink); a path is never resolved again after its check;
//! - what was opened is checked by `fstat` on its own descriptor;
//! - work inside a directory a user owns is done as that user ([`as_user`]), so a swap can
//!   only harm the user's own files;
//! - every read from outside has a stated bound, checked before the whole is read
//!   ([`read`]).
//!
//! `tests/privileged_paths.rs` fails when a privileged module calls a path-taking file
//! function that this module exists to replace.

mod as_user;
pub mod bounds;
mod dir;
mod place;
mod read;
mod stat;
mod trust;
mod walk;

pub use as_user::as_user;
pub use dir::{Dir, Entry};
pub use place::{is_refusal, open_checked, place, place_creating, place_following};
pub use read::{
    Bound, ReadError, open_for_reading, read_bounded, read_bounded_if, read_bounded_if_into,
    read_file,
};
pub use stat::{Kind, Stat};
pub use trust::Trust;
pub use walk::{walk, walk_parent};
