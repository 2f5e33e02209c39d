//! Bounded reads of files that come from outside: opened without blocking on a FIFO, checked
//! by `fstat` to be a regular file no larger than the bound before anything is read, and then
//! read to at most the bound (a file still growing is cut, and said to be).

use super::stat::{Kind, Stat};
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The bound of one kind of input: what it is (for the message) and its size cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    pub what: &'static str,
    pub max_bytes: u64,
}

/// Why a bounded read gave nothing.
#[derive(Debug)]
pub enum ReadError {
    /// Opening or reading failed.
    Io(io::Error),
    /// A FIFO, device, socket or folder: reading one could block, act or never end.
    NotRegular(Kind),
    /// Larger than the bound (before reading, or while reading: it grew).
    TooLarge { size: u64, bound: Bound },
    /// Its first bytes say it is not of its kind (the reason, from the caller's check).
    BadStart(String),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::NotRegular(Kind::Dir) => write!(f, "is a folder, not a file"),
            ReadError::NotRegular(_) => {
                write!(
                    f,
                    "is not a regular file (a FIFO, device or socket is not read)"
                )
            }
            ReadError::TooLarge { size, bound } => write!(
                f,
                "is {size} bytes, more than the {} bytes a {} may have",
                bound.max_bytes, bound.what
            ),
            ReadError::BadStart(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for ReadError {}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

/// Opens `path` for reading without blocking (a FIFO opens at once and is then refused by
/// [`read_bounded`]) and without making a terminal ours.
pub fn open_for_reading(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
}

/// Reads all of `file`, a regular file of at most `bound.max_bytes`: the size is checked on
/// the descriptor before reading, and at most one byte more than the bound is ever read.
pub fn read_bounded(file: &File, bound: Bound) -> Result<Vec<u8>, ReadError> {
    let size = checked_size(file, bound)?;
    read_whole(file, bound, size, |_| {})
}

/// [`read_bounded`], once `accept` has seen the file's first `head` bytes (fewer if it is
/// shorter) and found nothing wrong: a file whose start already says it is not of its kind
/// is refused having cost those bytes only, whatever its size. The head is read with
/// `pread`, so the whole is then read from the start.
pub fn read_bounded_if(
    file: &File,
    bound: Bound,
    head: usize,
    accept: impl FnOnce(&[u8]) -> Result<(), String>,
) -> Result<Vec<u8>, ReadError> {
    read_bounded_if_into(file, bound, head, accept, |_| {})
}

/// [`read_bounded_if`], handing the buffer, its capacity the file's size, to `prepare`
/// before a byte is read into it (to advise the kernel how to back it).
pub fn read_bounded_if_into(
    file: &File,
    bound: Bound,
    head: usize,
    accept: impl FnOnce(&[u8]) -> Result<(), String>,
    prepare: impl FnOnce(&Vec<u8>),
) -> Result<Vec<u8>, ReadError> {
    use std::os::unix::fs::FileExt;
    let size = checked_size(file, bound)?;
    let mut start = vec![0u8; head];
    let mut got = 0;
    while got < head {
        match file.read_at(&mut start[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
    accept(&start[..got]).map_err(ReadError::BadStart)?;
    read_whole(file, bound, size, prepare)
}

/// The size of `file`, a regular file within `bound`, by `fstat` on its descriptor.
fn checked_size(file: &File, bound: Bound) -> Result<u64, ReadError> {
    let st = Stat::of(file.as_fd())?;
    if st.kind != Kind::File {
        return Err(ReadError::NotRegular(st.kind));
    }
    if st.size > bound.max_bytes {
        return Err(ReadError::TooLarge {
            size: st.size,
            bound,
        });
    }
    Ok(st.size)
}

fn read_whole(
    file: &File,
    bound: Bound,
    size: u64,
    prepare: impl FnOnce(&Vec<u8>),
) -> Result<Vec<u8>, ReadError> {
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    prepare(&bytes);
    let reader = file;
    reader
        .take(bound.max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > bound.max_bytes {
        return Err(ReadError::TooLarge {
            size: bytes.len() as u64,
            bound,
        });
    }
    Ok(bytes)
}

/// [`open_for_reading`] then [`read_bounded`].
pub fn read_file(path: &Path, bound: Bound) -> Result<Vec<u8>, ReadError> {
    read_bounded(&open_for_reading(path)?, bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Bound = Bound {
        what: "test file",
        max_bytes: 8,
    };

    #[test]
    fn a_file_over_the_bound_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, "12345678").unwrap();
        assert_eq!(read_file(&f, SMALL).unwrap(), b"12345678");
        std::fs::write(&f, "123456789").unwrap();
        let err = read_file(&f, SMALL).unwrap_err().to_string();
        assert_eq!(
            err,
            "is 9 bytes, more than the 8 bytes a test file may have"
        );
        // A sparse file of a terabyte is refused by its size, never read.
        let sparse = std::fs::File::create(dir.path().join("sparse")).unwrap();
        sparse.set_len(1 << 40).unwrap();
        assert!(matches!(
            read_file(&dir.path().join("sparse"), SMALL),
            Err(ReadError::TooLarge { size, .. }) if size == 1 << 40
        ));
    }

    #[test]
    fn a_file_whose_start_is_refused_is_not_read_further() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, "ab345678").unwrap();
        let file = open_for_reading(&f).unwrap();
        let mut seen = Vec::new();
        let read = read_bounded_if(&file, SMALL, 2, |head| {
            seen = head.to_vec();
            Ok(())
        });
        // The head is read by offset: the whole still comes from the start.
        assert_eq!(read.unwrap(), b"ab345678");
        assert_eq!(seen, b"ab");
        let refused = read_bounded_if(&file, SMALL, 2, |_| Err("no magic".into()));
        assert_eq!(refused.unwrap_err().to_string(), "no magic");
        // A short file shows what it has.
        std::fs::write(&f, "a").unwrap();
        let file = open_for_reading(&f).unwrap();
        let read = read_bounded_if(&file, SMALL, 2, |head| {
            if head == b"a" {
                Ok(())
            } else {
                Err("?".into())
            }
        });
        assert_eq!(read.unwrap(), b"a");
    }

    #[test]
    fn a_fifo_or_a_device_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(
            read_file(&fifo, SMALL),
            Err(ReadError::NotRegular(Kind::Fifo))
        ));
        assert!(matches!(
            read_file(Path::new("/dev/zero"), SMALL),
            Err(ReadError::NotRegular(Kind::CharDevice))
        ));
        assert!(matches!(
            read_file(dir.path(), SMALL),
            Err(ReadError::NotRegular(Kind::Dir))
        ));
    }
}
