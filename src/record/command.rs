//! `vramscope record -o FILE`: samples exactly as the monitor does and records every event,
//! with no screen, until Ctrl-C, SIGTERM, SIGHUP or `--duration`; then finishes the file.

use super::live::open_error;
use crate::model::SourceEvent;
use crate::model::{now_ms, units};
use crate::recording::{Header, Recorder};
use crate::sources::runner::{Sampling, SamplingConfig};
use clap::Args;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::thread;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The file to write: a name ending in `.zst` is zstd-compressed (a day of 8 busy GPUs
    /// fits in 500 MB), any other plain JSON lines. Format: docs/recording-v1.md.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,

    /// Replace FILE if it exists.
    #[arg(long)]
    pub force: bool,

    /// Stop after this long (`90s`, `30m`, `12h`, `2d`); by default record until Ctrl-C.
    #[arg(long, value_name = "PERIOD", value_parser = parse_duration)]
    pub duration: Option<Duration>,
}

enum Message {
    Source(SourceEvent),
    Stop,
}

impl From<SourceEvent> for Message {
    fn from(event: SourceEvent) -> Self {
        Message::Source(event)
    }
}

/// Runs `vramscope record`, sampling with `sampling`; the exit status is 0 when the file was
/// finished.
pub fn run(sampling: SamplingConfig, args: &RecordArgs) -> ExitCode {
    let path = &args.output;
    let header = Header::new(sampling.interval.as_millis() as u64);
    let opened = if args.force {
        Recorder::replace(path, header)
    } else {
        Recorder::create(path, header)
    };
    let mut recorder = match opened {
        Ok(r) => r,
        Err(e) => {
            eprintln!(
                "vramscope: cannot record to {}: {}",
                path.display(),
                open_error(&e)
            );
            return ExitCode::from(2);
        }
    };
    let (tx, rx) = channel::<Message>();
    if let Err(e) = forward_signals(tx.clone()) {
        eprintln!("vramscope: cannot watch signals: {e}");
        return ExitCode::from(1);
    }
    // Held for as long as the recording runs: the refresh period's home.
    let _sampling = match Sampling::start(sampling, tx) {
        Ok(sampling) => sampling,
        Err(e) => {
            eprintln!("vramscope: {e}");
            return ExitCode::from(1);
        }
    };
    eprintln!("recording to {}; Ctrl-C stops", path.display());
    let started = Instant::now();
    let deadline = args.duration.map(|d| started + d);
    loop {
        // Records waiting in the buffer are flushed when due, even if no event follows.
        if let Err(e) = recorder.flush_if_due() {
            eprintln!("vramscope: recording to {} failed: {e}", path.display());
            return ExitCode::from(1);
        }
        let now = Instant::now();
        if deadline.is_some_and(|at| now >= at) {
            break;
        }
        let wait = [
            recorder.flush_due_in(),
            deadline.map(|at| at.saturating_duration_since(now)),
        ]
        .into_iter()
        .flatten()
        .min();
        let received = match wait {
            Some(wait) => rx.recv_timeout(wait),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        let event = match received {
            Ok(Message::Source(event)) => event,
            Err(RecvTimeoutError::Timeout) => continue,
            Ok(Message::Stop) | Err(RecvTimeoutError::Disconnected) => break,
        };
        if let Err(e) = recorder.record(now_ms(), &event) {
            eprintln!("vramscope: recording to {} failed: {e}", path.display());
            return ExitCode::from(1);
        }
        if let SourceEvent::NvmlUnavailable(problem) = &event {
            eprintln!(
                "vramscope: {}; recording host figures only",
                problem.one_line()
            );
        }
    }
    let records = recorder.records();
    if let Err(e) = recorder.finish() {
        eprintln!("vramscope: finishing {} failed: {e}", path.display());
        return ExitCode::from(1);
    }
    let size = std::fs::metadata(path).map_or(0, |m| m.len());
    eprintln!(
        "recorded {} to {}: {records} events, {}",
        duration_label(started.elapsed()),
        path.display(),
        units::bytes(size)
    );
    ExitCode::SUCCESS
}

/// SIGINT, SIGTERM and SIGHUP stop the recording cleanly.
fn forward_signals(tx: Sender<Message>) -> std::io::Result<()> {
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if signals.forever().next().is_some() {
                let _ = tx.send(Message::Stop);
            }
        })?;
    Ok(())
}

/// `90s`, `30m`, `12h`, `2d`, or plain seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, scale) = match text.char_indices().last() {
        Some((at, 's')) => (&text[..at], 1.0),
        Some((at, 'm')) => (&text[..at], 60.0),
        Some((at, 'h')) => (&text[..at], 3600.0),
        Some((at, 'd')) => (&text[..at], 86_400.0),
        _ => (text, 1.0),
    };
    let seconds = number
        .trim()
        .parse::<f64>()
        .ok()
        .map(|n| n * scale)
        .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e9)
        .ok_or_else(|| format!("`{text}` is not a duration (try 90s, 30m, 12h or 2d)"))?;
    Ok(Duration::from_secs_f64(seconds))
}

/// `2.0 s`; from a minute on as the report says it: `3m 12s`, `5h 02m`.
fn duration_label(d: Duration) -> String {
    if d.as_secs() < 60 {
        format!("{:.1} s", d.as_secs_f64())
    } else {
        crate::model::time::duration_label(d.as_millis() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_in_every_unit() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172_800)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("soon").is_err());
        assert_eq!(duration_label(Duration::from_secs(192)), "3m 12s");
    }
}
