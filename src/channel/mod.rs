//! The channel (docs/channel-v1.md): a file in shared memory through which an instrumented
//! program publishes its allocator statistics and vramscope reads them.
//!
//! - `layout`: every offset, size, kind, flag and limit of the format, used by both sides.
//! - `Writer` (writer, create, mapping, fork): the Rust writer, for Rust programs and tests.
//! - `Channel` (reader, validate, snapshot, ring, liveness, decode): the hostile-input reader.
//! - `discover`: where channels live, stale-file removal, containers and pid namespaces.
//! - `inspect`: one channel rendered as JSON, for `vramscope inspect`.
//!
//! Needs only libc: it builds without the `monitor` feature.

pub mod cleaning;
mod config;
mod copies;
mod crc32;
mod create;
mod decode;
pub(crate) mod dir;
pub mod discover;
mod fork;
mod inspect;
mod kinds;
pub mod layout;
mod liveness;
mod mapping;
mod model;
mod reader;
mod request;
mod ring;
mod sections;
pub(crate) mod sys;
mod text;
mod validate;
mod writer;

pub use config::{DeviceFigures, DeviceIdentity, EventFields, Exit, SampleFields, WriterConfig};
pub use crc32::{crc32, crc32_update};
pub use dir::{NotOpened, open_channel_file};
pub use inspect::inspect;
pub use kinds::{EventKind, WriterKind, WriterState};
pub use layout::ABSENT;
pub use model::{DeviceSlot, EventRecord, Identity, Liveness, SampleRecord, Status, Update};
pub use reader::{Channel, Policy, Rejected};
pub use request::{request_snapshot, snapshot_path};
pub use sections::{Capacities, Section, Sections};
pub use sys::{euid, monotonic_ns, pid_ns_inode, starttime, thread_cpu_ns};
pub use text::{parse_uuid, sanitize, slot_uuid_string, uuid_string};
pub use writer::Writer;
