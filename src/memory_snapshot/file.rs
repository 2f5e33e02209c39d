//! A snapshot file's bytes, read within its bound (`safe_fs::bounds::SNAPSHOT`): a FIFO or
//! a device is refused at once, a file over the size limit by `fstat` on its descriptor,
//! and a file that does not start as a pickle (`PROTO`, protocol 2 to 5, as every Python 3
//! pickler writes by default) after its first two bytes, before the rest is read: a 1 GiB
//! file of zeros costs two bytes, not a gigabyte.

use super::error::{ErrorKind, SitesError};
use super::limits::Limits;
use crate::safe_fs::{self, Bound, ReadError, bounds::SNAPSHOT};
use std::fs::File;

/// The pickle opcode `PROTO`, and the protocols a snapshot may be written in.
const PROTO: u8 = 0x80;
const PROTOCOLS: std::ops::RangeInclusive<u8> = 2..=5;

/// Whether `head`, a file's first bytes, starts a pickle a snapshot may be.
pub(crate) fn pickle_start(head: &[u8]) -> Result<(), String> {
    match head {
        [] => Err("not a memory snapshot: the file is empty".into()),
        [PROTO, protocol, ..] if PROTOCOLS.contains(protocol) => Ok(()),
        [PROTO, protocol, ..] => Err(format!(
            "not a memory snapshot: a pickle of protocol {protocol} (a snapshot is written in 2 to 5)"
        )),
        [first, ..] => Err(format!(
            "not a memory snapshot: it does not start as a pickle (byte 0 is 0x{first:02x}, not PROTO 0x80)"
        )),
    }
}

/// The bytes of the open snapshot `file`, within `limits.max_file_bytes`.
pub(crate) fn bytes_of(file: &File, limits: &Limits) -> Result<Vec<u8>, SitesError> {
    let bound = Bound {
        max_bytes: limits.max_file_bytes,
        ..SNAPSHOT
    };
    let prepare = |bytes: &Vec<u8>| {
        if limits.huge_pages {
            super::huge_pages::advise(bytes);
        }
    };
    safe_fs::read_bounded_if_into(file, bound, 2, pickle_start, prepare).map_err(|e| match e {
        ReadError::TooLarge { size, .. } => super::limits::too_big(size, limits),
        ReadError::BadStart(why) => SitesError::new(ErrorKind::NotASnapshot, why),
        ReadError::NotRegular(_) => {
            SitesError::new(ErrorKind::Io, format!("refused: the snapshot {e}"))
        }
        ReadError::Io(e) => {
            SitesError::new(ErrorKind::Io, format!("cannot read the snapshot: {e}"))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_pickle_of_protocol_2_to_5_starts_a_snapshot() {
        assert!(pickle_start(b"\x80\x04\x95").is_ok());
        assert!(pickle_start(b"\x80\x02").is_ok());
        assert!(pickle_start(b"\x80\x05").is_ok());
        assert_eq!(
            pickle_start(b"\x00\x00").unwrap_err(),
            "not a memory snapshot: it does not start as a pickle (byte 0 is 0x00, not PROTO 0x80)"
        );
        assert!(
            pickle_start(b"\x80\x01")
                .unwrap_err()
                .contains("protocol 1")
        );
        assert!(pickle_start(b"(dp0").is_err(), "protocol 0 has no PROTO");
        assert!(pickle_start(b"").unwrap_err().contains("empty"));
        assert!(pickle_start(b"\x80").unwrap_err().contains("0x80"));
    }

    #[test]
    fn a_sparse_gigabyte_of_zeros_is_refused_by_its_first_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zeros.pickle");
        let file = File::create(&path).unwrap();
        file.set_len(1 << 30).unwrap();
        let file = safe_fs::open_for_reading(&path).unwrap();
        let e = bytes_of(&file, &Limits::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotASnapshot);
        assert!(e.to_string().contains("byte 0 is 0x00"), "{e}");
        // One byte over the limit is refused by its size alone.
        file_of_len(&path, (1 << 30) + 1);
        let file = safe_fs::open_for_reading(&path).unwrap();
        let e = bytes_of(&file, &Limits::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Limit, "{e}");
    }

    fn file_of_len(path: &std::path::Path, len: u64) {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap()
            .set_len(len)
            .unwrap();
    }
}
