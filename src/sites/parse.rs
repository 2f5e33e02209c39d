//! The pickle crate's parse, on a thread of its own ("sites-parse"), fed only what the
//! guard has passed: the caller checks the pickle opcode by opcode (`guard.rs`) while the
//! crate builds its values from the bytes already checked, so the two overlap and the
//! crate never sees an opcode the guard would refuse. The same thread copies the values
//! into our types (`read::walk`), sends them, and only then drops the crate's values (a
//! tree of millions of `Rc`s, which cannot leave the thread that built them): the caller
//! has its answer without waiting for the drop, and a process that exits right after (the
//! CLI) never pays it.
//!
//! The deadline holds at every stage: the caller waits for the answer no longer than what
//! is left of it, the crate's reads fail once it has passed (so its parse stops at the next
//! 8 KiB it asks for), and the walk checks it every 4,096 values. A parse abandoned at the
//! deadline ends on its thread soon after, within the same bound on values: one tree of the
//! crate's values exists at a time in the process (`ONE_TREE`).

use super::cost::{ReadCost, Spent, Watch};
use super::error::{ErrorKind, SitesError};
use super::limits::{Limits, past_deadline};
use super::snapshot::MemorySnapshot;
use std::io::{self, Read};
use std::sync::mpsc::{RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Held while a parse thread holds the crate's values: a second parse waits for the first
/// one's drop, so memory stays within one tree's bound however often reads are asked for.
static ONE_TREE: Mutex<()> = Mutex::new(());

/// Waits until no parse thread holds the crate's values (their drop comes after the
/// answer): what a caller counting the whole cost of a read waits for.
pub(crate) fn settle() {
    drop(ONE_TREE.lock().unwrap_or_else(PoisonError::into_inner));
}

/// How far the guard has checked, shared by the caller and the parse thread.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    moved: Condvar,
}

#[derive(Default)]
struct GateState {
    /// Bytes before this offset passed the guard.
    checked: usize,
    /// The guard refused the pickle, or the caller stopped waiting: the parse stops.
    closed: bool,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn open_to(&self, checked: usize) {
        self.lock().checked = checked;
        self.moved.notify_all();
    }

    fn close(&self) {
        self.lock().closed = true;
        self.moved.notify_all();
    }

    /// Waits until bytes past `pos` are checked; the new bound, or why not.
    fn wait_past(&self, pos: usize, until: Instant) -> io::Result<usize> {
        let mut state = self.lock();
        loop {
            if state.closed {
                return Err(io::Error::other("the read was stopped"));
            }
            if state.checked > pos {
                return Ok(state.checked);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::other("the deadline passed"));
            }
            state = self
                .moved
                .wait_timeout(state, left)
                .map(|(s, _)| s)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }
}

/// The crate's reader: the checked bytes, and an error once the deadline has passed.
struct Gated {
    bytes: Arc<Vec<u8>>,
    pos: usize,
    open: usize,
    gate: Arc<Gate>,
    until: Instant,
}

impl Read for Gated {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() || self.pos >= self.bytes.len() {
            return Ok(0);
        }
        if Instant::now() > self.until {
            return Err(io::Error::other("the deadline passed"));
        }
        if self.pos >= self.open {
            self.open = self.gate.wait_past(self.pos, self.until)?;
        }
        let end = self.open.min(self.bytes.len()).min(self.pos + buf.len());
        let chunk = self.bytes.get(self.pos..end).unwrap_or(&[]);
        buf.get_mut(..chunk.len())
            .unwrap_or(&mut [])
            .copy_from_slice(chunk);
        self.pos += chunk.len();
        Ok(chunk.len())
    }
}

/// The one line for a read that ran out of time.
pub(crate) fn late(limits: &Limits) -> SitesError {
    past_deadline(limits.deadline)
}

/// What the parse thread sends: the snapshot (or why not) and what its stages took.
type Answer = (Result<MemorySnapshot, SitesError>, Spent, Spent);

/// Checks `bytes` (the guard, on this thread) while the crate parses them on its own, and
/// returns the snapshot; `cost` says what the guard, the parse and the walk took.
pub(crate) fn read(
    bytes: Arc<Vec<u8>>,
    limits: &Limits,
    started: Instant,
    cost: &mut ReadCost,
) -> Result<MemorySnapshot, SitesError> {
    let until = started.checked_add(limits.deadline).unwrap_or(started);
    let gate = Arc::new(Gate::default());
    let (tx, rx) = sync_channel(1);
    let job = Job {
        reader: Gated {
            bytes: Arc::clone(&bytes),
            pos: 0,
            open: 0,
            gate: Arc::clone(&gate),
            until,
        },
        limits: limits.clone(),
        started,
    };
    crate::threads::spawn("sites-parse", move || job.run(&tx))
        .map_err(|e| SitesError::new(ErrorKind::Io, format!("cannot read the snapshot: {e}")))?;
    let mut watch = Watch::start();
    let checked = super::guard::check(&bytes, limits, started, &mut |pos| gate.open_to(pos));
    cost.guard = watch.lap();
    if let Err(e) = checked {
        gate.close();
        return Err(e);
    }
    gate.open_to(bytes.len());
    drop(bytes);
    let left = until.saturating_duration_since(Instant::now());
    match rx.recv_timeout(left.max(Duration::from_millis(1))) {
        Ok((read, parse, walk)) => {
            cost.parse = parse;
            cost.walk = walk;
            read
        }
        Err(RecvTimeoutError::Timeout) => {
            gate.close();
            Err(late(limits))
        }
        Err(RecvTimeoutError::Disconnected) => Err(SitesError::new(
            ErrorKind::NotASnapshot,
            "not a memory snapshot: the pickle crate stopped without an answer",
        )),
    }
}

/// The parse thread's work.
struct Job {
    reader: Gated,
    limits: Limits,
    started: Instant,
}

impl Job {
    fn run(self, tx: &SyncSender<Answer>) {
        let _alone = ONE_TREE.lock().unwrap_or_else(PoisonError::into_inner);
        let gate = Arc::clone(&self.reader.gate);
        let until = self.reader.until;
        let mut watch = Watch::start();
        // The crate buffers its reader itself (8 KiB at a time).
        let parsed =
            pickled::value_from_reader(self.reader, pickled::DeOptions::new().decode_strings());
        let parse = watch.lap();
        let value = match parsed {
            Ok(value) => value,
            Err(e) => {
                let why = if Instant::now() > until {
                    late(&self.limits)
                } else {
                    SitesError::new(
                        ErrorKind::NotASnapshot,
                        format!("not a memory snapshot: {e}"),
                    )
                };
                // A closed gate: the caller has the guard's reason already.
                if !gate.lock().closed {
                    let _ = tx.send((Err(why), parse, Spent::default()));
                }
                return;
            }
        };
        let read = super::read::walk(&value, &self.limits, self.started);
        let walk = watch.lap();
        // The caller may have stopped waiting: then nobody reads the answer.
        let _ = tx.send((read, parse, walk));
        drop(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// pickle.dumps({'segments': []}, protocol=4)
    const EMPTY: &[u8] =
        b"\x80\x04\x95\x11\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x08segments\x94]\x94s.";

    fn job(bytes: &[u8], gate: &Arc<Gate>, until: Instant) -> Job {
        Job {
            reader: Gated {
                bytes: Arc::new(bytes.to_vec()),
                pos: 0,
                open: 0,
                gate: Arc::clone(gate),
                until,
            },
            limits: Limits::default(),
            started: Instant::now(),
        }
    }

    #[test]
    fn a_checked_pickle_is_parsed_and_walked_on_the_thread() {
        let gate = Arc::new(Gate::default());
        gate.open_to(EMPTY.len());
        let (tx, rx) = sync_channel(1);
        job(EMPTY, &gate, Instant::now() + Duration::from_secs(60)).run(&tx);
        let (read, parse, _) = rx.recv().unwrap();
        assert!(read.unwrap().segments.is_empty());
        assert!(parse.wall > Duration::ZERO);
    }

    #[test]
    fn the_crate_reads_nothing_past_its_deadline() {
        let gate = Arc::new(Gate::default());
        gate.open_to(EMPTY.len());
        let (tx, rx) = sync_channel(1);
        let past = Instant::now()
            .checked_sub(Duration::from_millis(1))
            .unwrap();
        job(EMPTY, &gate, past).run(&tx);
        let e = rx.recv().unwrap().0.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Limit, "{e}");
        assert!(e.to_string().contains("(the deadline)"), "{e}");
    }

    #[test]
    fn the_crate_waits_for_the_guard_and_stops_with_it() {
        // Nothing checked yet: a read waits, and fails once the deadline passes.
        let gate = Arc::new(Gate::default());
        let mut reader = job(EMPTY, &gate, Instant::now() + Duration::from_millis(50)).reader;
        let waited = Instant::now();
        let mut buf = [0u8; 64];
        assert!(reader.read(&mut buf).is_err());
        assert!(waited.elapsed() >= Duration::from_millis(50));

        // Bytes are handed over as the guard passes them, and none past that.
        let gate = Arc::new(Gate::default());
        let mut reader = job(EMPTY, &gate, Instant::now() + Duration::from_secs(60)).reader;
        gate.open_to(5);
        assert_eq!(reader.read(&mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], &EMPTY[..5]);

        // A guard that refuses the rest closes the gate: the waiting read fails at once.
        let closer = Arc::clone(&gate);
        let waiter = std::thread::spawn(move || reader.read(&mut [0u8; 64]).is_err());
        std::thread::sleep(Duration::from_millis(20));
        closer.close();
        assert!(waiter.join().unwrap());

        // No crate answer is sent when the gate was closed: the caller has the guard's.
        let gate = Arc::new(Gate::default());
        gate.open_to(5);
        gate.close();
        let (tx, rx) = sync_channel(1);
        job(EMPTY, &gate, Instant::now() + Duration::from_secs(60)).run(&tx);
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn the_deadline_line_says_milliseconds_below_a_second() {
        let l = |ms| Limits {
            deadline: Duration::from_millis(ms),
            ..Limits::default()
        };
        assert_eq!(
            late(&l(30_000)).to_string(),
            "gave up reading after 30 s (the deadline)"
        );
        assert_eq!(
            late(&l(150)).to_string(),
            "gave up reading after 150 ms (the deadline)"
        );
    }
}
