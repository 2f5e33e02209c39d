//! Byte slices copied out of a channel, turned into values. Every function takes whatever
//! bytes it is given: a short slice reads as zeros rather than panicking, lengths are clamped
//! to their fields, and all text is sanitised.

use super::crc32::crc32;
use super::kinds::{EventKind, WriterKind};
use super::layout::{ABSENT, device, event, header, sample, status, string};
use super::model::{DeviceSlot, EventRecord, Identity, SampleRecord, Status};
use super::text::{padded, sanitize};

/// `len` bytes at `off`, if all are there (offsets near `usize::MAX` included).
fn field(b: &[u8], off: usize, len: usize) -> Option<&[u8]> {
    b.get(off..off.checked_add(len)?)
}

/// The `N` bytes at `off`, if all are there.
fn array_at<const N: usize>(b: &[u8], off: usize) -> Option<[u8; N]> {
    field(b, off, N)?.try_into().ok()
}

pub fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(array_at(b, off).unwrap_or_default())
}

pub fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(array_at(b, off).unwrap_or_default())
}

pub fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes(array_at(b, off).unwrap_or_default())
}

fn bytes_at(b: &[u8], off: usize, len: usize) -> &[u8] {
    field(b, off, len).unwrap_or(&[])
}

/// `ABSENT` as `None`.
pub fn figure(v: u64) -> Option<u64> {
    (v != ABSENT).then_some(v)
}

fn rank(v: u32) -> Option<i32> {
    let r = v as i32;
    (r >= 0).then_some(r)
}

/// The identity fields of a header already validated by `validate::header`.
pub fn identity(h: &[u8]) -> Identity {
    let text = |off, len| padded(bytes_at(h, off, len));
    Identity {
        pid: u64_at(h, header::PID),
        starttime: u64_at(h, header::STARTTIME),
        pid_ns: figure(u64_at(h, header::PID_NS)),
        uid: u64_at(h, header::UID),
        created_realtime_ns: u64_at(h, header::CREATED_REALTIME),
        created_monotonic_ns: u64_at(h, header::CREATED_MONOTONIC),
        kind: WriterKind::from_code(u32_at(h, header::WRITER_KIND)),
        sample_period_us: u32_at(h, header::SAMPLE_PERIOD),
        rank: rank(u32_at(h, header::RANK)),
        local_rank: rank(u32_at(h, header::LOCAL_RANK)),
        world_size: rank(u32_at(h, header::WORLD_SIZE)),
        job_id: text(header::JOB_ID, header::JOB_ID_LEN),
        framework: text(header::FRAMEWORK, header::FRAMEWORK_LEN),
        cmdline: text(header::CMDLINE, header::CMDLINE_LEN),
        allocator_config: text(header::ALLOCATOR_CONFIG, header::ALLOCATOR_CONFIG_LEN),
        flags: u32_at(h, header::FLAGS),
        minor: u16_at(h, header::MINOR),
        file_size: u64_at(h, header::FILE_SIZE),
    }
}

/// A device slot's fields (its seq already checked).
pub fn device_slot(index: usize, b: &[u8]) -> DeviceSlot {
    let flags = u32_at(b, device::FLAGS);
    let uuid = array_at::<{ device::UUID_LEN }>(b, device::UUID)
        .filter(|_| flags & device::FLAG_UUID_VALID != 0);
    let pci = padded(bytes_at(b, device::PCI_BUS_ID, device::PCI_BUS_ID_LEN));
    let pci_bus_id = (flags & device::FLAG_PCI_BUS_ID_VALID != 0 && !pci.is_empty()).then_some(pci);
    let f = |off| figure(u64_at(b, off));
    DeviceSlot {
        index,
        ordinal: u32_at(b, device::ORDINAL),
        uuid,
        uuid_is_mig: flags & device::FLAG_UUID_MIG != 0,
        pci_bus_id,
        total: f(device::TOTAL),
        read_at_ns: f(device::READ_AT),
        allocated: f(device::ALLOCATED),
        allocated_peak: f(device::ALLOCATED_PEAK),
        reserved: f(device::RESERVED),
        reserved_peak: f(device::RESERVED_PEAK),
        active: f(device::ACTIVE),
        inactive_split: f(device::INACTIVE_SPLIT),
        requested: f(device::REQUESTED),
        alloc_retries: f(device::ALLOC_RETRIES),
        ooms: f(device::OOMS),
        device_allocs: f(device::DEVICE_ALLOCS),
        device_frees: f(device::DEVICE_FREES),
        device_free: f(device::DEVICE_FREE),
        limit: f(device::LIMIT),
        interval_peak: f(device::INTERVAL_PEAK),
        step_peak: f(device::STEP_PEAK),
    }
}

/// The status block (192 bytes from its seq); `None` before the writer first set it.
pub fn status(b: &[u8]) -> Option<Status> {
    if u64_at(b, status::SEQ) == 0 {
        return None;
    }
    let len = (u64_at(b, status::LABEL_LEN)).min(status::LABEL_CAP as u64) as usize;
    Some(Status {
        step: figure(u64_at(b, status::STEP)),
        set_at_ns: u64_at(b, status::SET_AT),
        label: sanitize(bytes_at(b, status::LABEL, len)),
    })
}

/// A phase name record.
pub fn phase(b: &[u8]) -> String {
    let len = usize::from(b.get(string::LEN).copied().unwrap_or(0)).min(string::MAX_LEN);
    sanitize(bytes_at(b, string::TEXT, len))
}

/// Whether a ring record's stored CRC matches its payload.
pub fn crc_ok(b: &[u8], start: usize, crc_at: usize) -> bool {
    match b.get(start..crc_at) {
        Some(payload) => crc32(payload) == u32_at(b, crc_at),
        None => false,
    }
}

pub fn sample(b: &[u8]) -> SampleRecord {
    let f = |off| figure(u64_at(b, off));
    SampleRecord {
        t_ns: u64_at(b, sample::T),
        slot: b.get(sample::SLOT).copied().unwrap_or(0),
        flags: b.get(sample::FLAGS).copied().unwrap_or(0),
        phase: u16_at(b, sample::PHASE),
        allocated: f(sample::ALLOCATED),
        reserved: f(sample::RESERVED),
        peak: f(sample::PEAK),
        active: f(sample::ACTIVE),
        step: f(sample::STEP),
    }
}

pub fn event(b: &[u8]) -> EventRecord {
    let len = usize::from(u16_at(b, event::TEXT_LEN)).min(event::TEXT_CAP);
    let mut args = [0u64; event::ARG_COUNT];
    for (i, a) in args.iter_mut().enumerate() {
        *a = u64_at(b, event::ARGS + 8 * i);
    }
    let slot = u16_at(b, event::SLOT);
    let raw = bytes_at(b, event::TEXT, len);
    let text = sanitize(raw);
    EventRecord {
        t_ns: u64_at(b, event::T),
        kind: EventKind::from_code(u16_at(b, event::KIND)),
        slot: (slot != event::NO_SLOT).then_some(slot),
        phase: u16_at(b, event::PHASE),
        step: figure(u64_at(b, event::STEP)),
        args,
        text_intact: text.as_bytes() == raw,
        text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_or_empty_input_reads_as_zeros_never_panics() {
        assert_eq!(u64_at(&[1, 2, 3], 0), 0);
        assert_eq!(u64_at(&[], usize::MAX - 3), 0);
        assert_eq!(phase(&[]), "");
        assert_eq!(status(&[]), None);
        assert!(!crc_ok(&[0; 10], sample::CRC_START, sample::CRC));
        let e = event(&[0xFF; 3]);
        assert_eq!(e.text, "");
        let d = device_slot(0, &[0xFF; 20]);
        assert_eq!(d.uuid, None);
    }

    #[test]
    fn lengths_are_clamped_to_their_fields() {
        let mut s = [b'x'; 64];
        s[0] = 255;
        assert_eq!(phase(&s).len(), 63);
        let mut e = [b'y'; 256];
        e[event::TEXT_LEN..event::TEXT_LEN + 2].copy_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(event(&e).text.len(), event::TEXT_CAP);
    }
}
