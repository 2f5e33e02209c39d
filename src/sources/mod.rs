//! Samplers: they run off the UI thread (see `pool`) and send owned samples to the one thread
//! that owns the state. Nothing here knows about the terminal.

pub mod alarm;
pub mod channels;
pub mod container;
mod dir_watch;
pub mod host;
pub mod jobs;
pub mod nvml;
pub mod nvml_errors;
mod nvml_lists;
mod nvml_memory;
mod nvml_mig;
pub mod oneshot;
pub mod pod;
pub mod pool;
pub mod process_meter;
pub mod runner;
pub mod schedule;
pub mod sites;
pub mod sites_worker;
