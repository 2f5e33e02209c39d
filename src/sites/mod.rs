//! `vramscope sites FILE [FILE2]`, the mode: `command` reads the snapshots and asks
//! `crate::memory_snapshot` what held the memory; `render` has the text and JSON it prints
//! (`held_json` for embedding), `writer_json` the writer's key and the file for `--json`.
//! `vramscope diff` hands two snapshots to `command`.

pub mod command;
pub mod render;
pub mod writer_json;
