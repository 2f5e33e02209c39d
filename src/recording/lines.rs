//! Lines of a recording, plain or zstd-compressed, read with bounded memory: a line longer
//! than the limit is an error as soon as the limit is passed, the zstd window is capped, and
//! a compressed stream that simply stops (the recorder was killed) ends the lines quietly,
//! while damage in the middle is an error naming the compressed byte offset.

use std::io::{self, BufRead, BufReader, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The zstd magic number, little-endian on disk.
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
/// Largest zstd window accepted: 16 MiB (vramscope writes 128 KiB windows).
const ZSTD_WINDOW_LOG_MAX: u32 = crate::safe_fs::bounds::RECORDING_ZSTD_WINDOW_LOG;
const BUFFER: usize = 64 * 1024;

/// Compressed input goes to the decoder this many bytes at a time. zstd reports damage
/// without saying how far it got, and the output of the failing call is lost: small calls
/// keep both the error's byte offset and the loss to within this much input.
const ZSTD_INPUT_STEP: usize = 512;

/// Counts the bytes taken from the underlying reader, for error offsets, and hands them out
/// at most `step` at a time.
struct Counting<R> {
    inner: R,
    consumed: Arc<AtomicU64>,
    step: usize,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.consumed.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counting<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        let step = self.step;
        self.inner.fill_buf().map(|buf| &buf[..buf.len().min(step)])
    }

    fn consume(&mut self, amount: usize) {
        self.consumed.fetch_add(amount as u64, Ordering::Relaxed);
        self.inner.consume(amount);
    }
}

/// What ended a read.
pub enum Problem {
    /// A line is longer than the limit.
    TooLong,
    /// The file could not be read, or its compressed data is damaged: the message, and the
    /// byte offset in the file.
    Damaged(String, u64),
}

/// One line read.
pub enum Line {
    /// A whole line, its newline removed.
    Whole,
    /// The last bytes of the data, with no newline after them: a record cut short.
    Cut,
    End,
}

/// The lines of one recording.
pub struct Lines {
    source: Box<dyn BufRead + Send>,
    /// Compressed bytes consumed so far, for zstd recordings.
    consumed: Arc<AtomicU64>,
    compressed: bool,
    /// The current line's bytes.
    pub buf: Vec<u8>,
    /// Number of the line in `buf`, from 1.
    pub number: u64,
    /// Uncompressed offset of the line in `buf`.
    pub offset: u64,
    next_offset: u64,
}

impl Lines {
    /// Lines from `raw`, decompressed when it starts with zstd's magic number.
    pub fn new<R: BufRead + Send + 'static>(mut raw: R) -> Result<Lines, Problem> {
        let compressed = raw
            .fill_buf()
            .map_err(|e| Problem::Damaged(format!("cannot read ({e})"), 0))?
            .starts_with(&ZSTD_MAGIC);
        let consumed = Arc::new(AtomicU64::new(0));
        let source: Box<dyn BufRead + Send> = if compressed {
            let counting = Counting {
                inner: raw,
                consumed: Arc::clone(&consumed),
                step: ZSTD_INPUT_STEP,
            };
            let mut decoder = zstd::stream::read::Decoder::with_buffer(counting)
                .map_err(|e| Problem::Damaged(format!("cannot decompress ({e})"), 0))?;
            decoder
                .window_log_max(ZSTD_WINDOW_LOG_MAX)
                .map_err(|e| Problem::Damaged(format!("cannot decompress ({e})"), 0))?;
            Box::new(BufReader::with_capacity(BUFFER, decoder))
        } else {
            Box::new(Counting {
                inner: raw,
                consumed: Arc::clone(&consumed),
                step: usize::MAX,
            })
        };
        Ok(Lines {
            source,
            consumed,
            compressed,
            buf: Vec::new(),
            number: 0,
            offset: 0,
            next_offset: 0,
        })
    }

    pub fn compressed(&self) -> bool {
        self.compressed
    }

    /// The first bytes of the (decompressed) data, without taking them.
    pub fn peek(&mut self) -> Result<&[u8], Problem> {
        loop {
            match self.source.fill_buf() {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if self.compressed && e.kind() == io::ErrorKind::UnexpectedEof => {
                    return Ok(&[]);
                }
                Err(e) => return Err(self.damaged(&e)),
            }
        }
        // Filled: this returns the buffered bytes without reading.
        Ok(self.source.fill_buf().unwrap_or_default())
    }

    /// Reads the next line into `buf`, at most `limit` bytes long.
    pub fn next(&mut self, limit: usize) -> Result<Line, Problem> {
        self.buf.clear();
        self.offset = self.next_offset;
        loop {
            let chunk = match self.source.fill_buf() {
                Ok(chunk) => chunk,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // The compressed stream stops inside a frame: the recorder was killed.
                // Everything decodable has been delivered before this error.
                Err(e) if self.compressed && e.kind() == io::ErrorKind::UnexpectedEof => &[],
                Err(e) => return Err(self.damaged(&e)),
            };
            if chunk.is_empty() {
                return Ok(if self.buf.is_empty() {
                    Line::End
                } else {
                    self.number += 1;
                    Line::Cut
                });
            }
            let (take, whole) = match chunk.iter().position(|&b| b == b'\n') {
                Some(at) => (at, true),
                None => (chunk.len(), false),
            };
            if self.buf.len() + take > limit {
                self.number += 1;
                return Err(Problem::TooLong);
            }
            self.buf.extend_from_slice(&chunk[..take]);
            let used = take + usize::from(whole);
            self.source.consume(used);
            self.next_offset += used as u64;
            if whole {
                self.number += 1;
                return Ok(Line::Whole);
            }
        }
    }

    fn damaged(&self, e: &io::Error) -> Problem {
        let what = if self.compressed {
            format!("damaged zstd data ({e})")
        } else {
            format!("cannot read ({e})")
        };
        Problem::Damaged(what, self.consumed.load(Ordering::Relaxed))
    }
}
