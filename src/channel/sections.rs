//! The section table (§2.2): where the four arrays lie. Writers plan it from capacities;
//! readers check an untrusted one against every rule before using a single offset from it.

use super::decode::{u32_at, u64_at};
use super::layout::{
    FIELD_ALIGN, PAGE, SECTIONS_MIN_OFFSET, defaults, device, event, header, sample, section,
    string,
};

/// One entry of the section table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Section {
    pub offset: u64,
    pub record_size: u32,
    pub capacity: u32,
}

impl Section {
    /// First byte past the section.
    pub fn end(&self) -> u64 {
        self.offset + self.bytes()
    }

    /// Byte offset of record `i` (the caller keeps `i` below the capacity).
    pub fn record(&self, i: u64) -> u64 {
        self.offset + i * u64::from(self.record_size)
    }

    fn bytes(&self) -> u64 {
        u64::from(self.record_size) * u64::from(self.capacity)
    }
}

/// The four sections, in table order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sections {
    pub devices: Section,
    pub strings: Section,
    pub samples: Section,
    pub events: Section,
}

/// Capacities of the four arrays; the default gives the spec's 392 KiB file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacities {
    pub devices: u32,
    pub strings: u32,
    pub samples: u32,
    pub events: u32,
}

impl Default for Capacities {
    fn default() -> Capacities {
        Capacities {
            devices: defaults::DEVICES,
            strings: defaults::STRINGS,
            samples: defaults::SAMPLES,
            events: defaults::EVENTS,
        }
    }
}

const NAMES: [&str; section::COUNT] = ["devices", "strings", "samples", "events"];
const V1_SIZES: [usize; section::COUNT] = [
    device::RECORD_SIZE,
    string::RECORD_SIZE,
    sample::RECORD_SIZE,
    event::RECORD_SIZE,
];

fn align_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

/// Whether `cap` is within the reader's limits for section `i` (table order).
fn capacity_ok(i: usize, cap: u32) -> bool {
    match i {
        section::DEVICES => (1..=section::DEVICES_MAX).contains(&cap),
        section::STRINGS => cap <= section::STRINGS_MAX,
        _ => cap.is_power_of_two() && cap <= section::RING_MAX,
    }
}

impl Sections {
    fn all(&self) -> [Section; section::COUNT] {
        [self.devices, self.strings, self.samples, self.events]
    }

    /// The layout the writers here use: devices at `0x400`, strings right after, each ring on a
    /// page boundary and the file rounded up to a page. Default capacities give exactly the
    /// offsets of the spec's table. `None` if a capacity breaks the reader's limits.
    pub fn plan(caps: Capacities) -> Option<(Sections, u64)> {
        let table = [caps.devices, caps.strings, caps.samples, caps.events];
        if !(0..section::COUNT).all(|i| capacity_ok(i, table[i])) {
            return None;
        }
        let devices = Section {
            offset: SECTIONS_MIN_OFFSET,
            record_size: device::RECORD_SIZE as u32,
            capacity: caps.devices,
        };
        let strings = Section {
            offset: devices.end(),
            record_size: string::RECORD_SIZE as u32,
            capacity: caps.strings,
        };
        let samples = Section {
            offset: align_up(strings.end(), PAGE),
            record_size: sample::RECORD_SIZE as u32,
            capacity: caps.samples,
        };
        let events = Section {
            offset: align_up(samples.end(), PAGE),
            record_size: event::RECORD_SIZE as u32,
            capacity: caps.events,
        };
        let file_size = align_up(events.end(), PAGE);
        Some((
            Sections {
                devices,
                strings,
                samples,
                events,
            },
            file_size,
        ))
    }

    /// The table as its 64 bytes in the header.
    pub fn encode(&self) -> [u8; section::COUNT * section::ENTRY_SIZE] {
        let mut out = [0u8; section::COUNT * section::ENTRY_SIZE];
        for (i, s) in self.all().iter().enumerate() {
            let e = &mut out[i * section::ENTRY_SIZE..(i + 1) * section::ENTRY_SIZE];
            e[section::OFFSET..section::OFFSET + 8].copy_from_slice(&s.offset.to_le_bytes());
            e[section::RECORD_SIZE..section::RECORD_SIZE + 4]
                .copy_from_slice(&s.record_size.to_le_bytes());
            e[section::CAPACITY..section::CAPACITY + 4].copy_from_slice(&s.capacity.to_le_bytes());
        }
        out
    }

    /// Reads and checks the table in `head` (the 512-byte header) against a file of
    /// `file_size` bytes. The error is a one-line reason.
    pub fn decode(head: &[u8; header::SIZE], file_size: u64) -> Result<Sections, String> {
        let mut s = [Section {
            offset: 0,
            record_size: 0,
            capacity: 0,
        }; section::COUNT];
        for (i, entry) in s.iter_mut().enumerate() {
            let at = header::SECTION_TABLE + i * section::ENTRY_SIZE;
            *entry = Section {
                offset: u64_at(head, at + section::OFFSET),
                record_size: u32_at(head, at + section::RECORD_SIZE),
                capacity: u32_at(head, at + section::CAPACITY),
            };
            check_one(i, entry, file_size)?;
        }
        for i in 0..section::COUNT {
            for j in i + 1..section::COUNT {
                let (a, b) = (s[i], s[j]);
                let empty = a.bytes() == 0 || b.bytes() == 0;
                if !empty && a.offset < b.end() && b.offset < a.end() {
                    return Err(format!(
                        "sections overlap: {} [{:#x}, {:#x}) and {} [{:#x}, {:#x})",
                        NAMES[i],
                        a.offset,
                        a.end(),
                        NAMES[j],
                        b.offset,
                        b.end()
                    ));
                }
            }
        }
        Ok(Sections {
            devices: s[section::DEVICES],
            strings: s[section::STRINGS],
            samples: s[section::SAMPLES],
            events: s[section::EVENTS],
        })
    }
}

fn check_one(i: usize, s: &Section, file_size: u64) -> Result<(), String> {
    let name = NAMES[i];
    if !s.offset.is_multiple_of(FIELD_ALIGN) {
        return Err(format!(
            "{name} section offset {:#x} is not a multiple of 8",
            s.offset
        ));
    }
    if s.offset < SECTIONS_MIN_OFFSET {
        return Err(format!(
            "{name} section offset {:#x} is before {SECTIONS_MIN_OFFSET:#x}",
            s.offset
        ));
    }
    if (s.record_size as usize) < V1_SIZES[i] {
        return Err(format!(
            "{name} record size {} is below the v1 size {}",
            s.record_size, V1_SIZES[i]
        ));
    }
    if !u64::from(s.record_size).is_multiple_of(FIELD_ALIGN) {
        return Err(format!(
            "{name} record size {} is not a multiple of 8",
            s.record_size
        ));
    }
    let cap = s.capacity;
    if !capacity_ok(i, cap) {
        let rule = match i {
            section::DEVICES => format!("1..={}", section::DEVICES_MAX),
            section::STRINGS => format!("0..={}", section::STRINGS_MAX),
            _ => format!("a power of two in 1..={}", section::RING_MAX),
        };
        return Err(format!("{name} capacity {cap} is not {rule}"));
    }
    // record_size * capacity < 2^52, but the offset is arbitrary: add without overflow.
    let end = s.offset.checked_add(s.bytes());
    if end.is_none_or(|e| e > file_size) {
        return Err(format!(
            "{name} section [{:#x}, +{} x {}) runs past the file's {file_size} bytes",
            s.offset, cap, s.record_size
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_plan_is_the_spec_table() {
        let (s, size) = Sections::plan(Capacities::default()).expect("default plan");
        assert_eq!(s.devices.offset, defaults::DEVICES_OFFSET);
        assert_eq!(s.strings.offset, defaults::STRINGS_OFFSET);
        assert_eq!(s.samples.offset, defaults::SAMPLES_OFFSET);
        assert_eq!(s.events.offset, defaults::EVENTS_OFFSET);
        assert_eq!(size, defaults::FILE_SIZE);
    }

    #[test]
    fn plans_round_trip_through_the_header() {
        for caps in [
            Capacities::default(),
            Capacities {
                devices: 1,
                strings: 0,
                samples: 1,
                events: 1,
            },
            Capacities {
                devices: 64,
                strings: 1024,
                samples: 8,
                events: 4,
            },
        ] {
            let (s, size) = Sections::plan(caps).expect("plan");
            let mut head = [0u8; header::SIZE];
            head[header::SECTION_TABLE..].copy_from_slice(&s.encode());
            assert_eq!(Sections::decode(&head, size), Ok(s));
            // The file is rounded up to a page; the last section must still fit.
            assert_eq!(Sections::decode(&head, s.events.end()), Ok(s));
            let short = Sections::decode(&head, s.events.end() - 1);
            assert!(
                short.as_ref().is_err_and(|e| e.contains("events section")),
                "{short:?}"
            );
        }
    }

    #[test]
    fn plan_refuses_what_a_reader_would_reject() {
        let bad = |f: fn(&mut Capacities)| {
            let mut c = Capacities::default();
            f(&mut c);
            Sections::plan(c).is_none()
        };
        assert!(bad(|c| c.devices = 0));
        assert!(bad(|c| c.devices = 65));
        assert!(bad(|c| c.strings = 1025));
        assert!(bad(|c| c.samples = 3));
        assert!(bad(|c| c.events = 1 << 21));
    }
}
