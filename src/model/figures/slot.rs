//! What an instrumented process publishes for one GPU (one slot of its channel), in the order
//! `--json` gives it. The per-process Prometheus families of the OOM and retry counters are
//! these figures of the slot the process row joins.

use super::{Figure, Unit};

/// The writer's own device number (after `CUDA_VISIBLE_DEVICES`).
pub const ORDINAL: Figure = Figure::new("ordinal", Unit::Id, "device");
pub const UUID: Figure = Figure::new("uuid", Unit::Text, "UUID");
pub const PCI_BUS_ID: Figure = Figure::new("pci_bus_id", Unit::Text, "bus id");
pub const TOTAL: Figure = Figure::new("total", Unit::Bytes, "total");
pub const ALLOCATED: Figure = Figure::new("allocated", Unit::Bytes, "allocated");
pub const ALLOCATED_PEAK: Figure = Figure::new("allocated_peak", Unit::Bytes, "allocated peak");
pub const RESERVED: Figure = Figure::new("reserved", Unit::Bytes, "reserved");
pub const RESERVED_PEAK: Figure = Figure::new("reserved_peak", Unit::Bytes, "reserved peak");
pub const ACTIVE: Figure = Figure::new("active", Unit::Bytes, "active");
pub const INACTIVE_SPLIT: Figure = Figure::new("inactive_split", Unit::Bytes, "inactive split");
pub const REQUESTED: Figure = Figure::new("requested", Unit::Bytes, "requested");
pub const ALLOC_RETRIES: Figure = Figure::new("alloc_retries", Unit::Count, "retries")
    .in_family("vramscope_process_allocator_retries_total");
pub const OOMS: Figure =
    Figure::new("ooms", Unit::Count, "OOMs").in_family("vramscope_process_allocator_ooms_total");
pub const DEVICE_FREE: Figure = Figure::new("device_free", Unit::Bytes, "device free");
pub const LIMIT: Figure = Figure::new("limit", Unit::Bytes, "limit");
/// The highest allocated since the writer's previous sample (`peak` in the first `export`).
pub const INTERVAL_PEAK: Figure =
    Figure::new("interval_peak", Unit::Bytes, "interval peak").was(&["peak"]);
pub const STEP_PEAK: Figure = Figure::new("step_peak", Unit::Bytes, "step peak");

/// Every figure of a slot, in output order.
pub const ALL: &[&Figure] = &[
    &ORDINAL,
    &UUID,
    &PCI_BUS_ID,
    &TOTAL,
    &ALLOCATED,
    &ALLOCATED_PEAK,
    &RESERVED,
    &RESERVED_PEAK,
    &ACTIVE,
    &INACTIVE_SPLIT,
    &REQUESTED,
    &ALLOC_RETRIES,
    &OOMS,
    &DEVICE_FREE,
    &LIMIT,
    &INTERVAL_PEAK,
    &STEP_PEAK,
];
