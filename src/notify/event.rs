//! One event a hook is told of: the JSON on its standard input and the few variables in its
//! environment. Text that came from a writer or a process is foreign: JSON escapes it on
//! stdin, and it is cleaned (`text::clean`) before it becomes a variable or a status line.

use super::spec::Kind;
use serde::Serialize;

/// What a hook is told.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Event {
    pub kind: &'static str,
    /// When vramscope saw it, milliseconds since the Unix epoch.
    pub at_ms: u64,
    pub pid: Option<u32>,
    pub gpu: Option<u32>,
    pub rank: Option<i32>,
    /// The writer's job id (torchrun's, Slurm's), when it says.
    pub job: Option<String>,
    pub command: Option<String>,
    /// One line saying what happened.
    pub summary: String,
    /// The kind's own figures (the OOM's request, the peak's bytes, the exit status...).
    pub details: serde_json::Value,
    /// Events of this kind held back by the rate limit since the last hook run.
    pub held_back: u64,
}

impl Event {
    pub fn new(kind: Kind, at_ms: u64, summary: String) -> Event {
        Event {
            kind: kind.name(),
            at_ms,
            pid: None,
            gpu: None,
            rank: None,
            job: None,
            command: None,
            summary,
            details: serde_json::Value::Null,
            held_back: 0,
        }
    }

    /// The event with its foreign text (summary, job, command) cleaned of control characters
    /// and bidi overrides, so that a hook that prints it cannot reach a terminal raw.
    pub fn cleaned(mut self) -> Event {
        self.summary = one_line(&self.summary);
        self.job = self.job.as_deref().map(one_line);
        self.command = self.command.as_deref().map(one_line);
        self
    }

    pub fn json(&self) -> String {
        let mut text = serde_json::to_string(self).unwrap_or_else(|_| "{}".to_string());
        text.push('\n');
        text
    }

    /// `VRAMSCOPE_EVENT`, `_PID`, `_GPU`, `_RANK`, `_JOB`, `_SUMMARY`: each set only when
    /// known, each cleaned of control characters.
    pub fn environment(&self) -> Vec<(&'static str, String)> {
        let mut vars = vec![
            ("VRAMSCOPE_EVENT", self.kind.to_string()),
            ("VRAMSCOPE_SUMMARY", one_line(&self.summary)),
        ];
        if let Some(pid) = self.pid {
            vars.push(("VRAMSCOPE_PID", pid.to_string()));
        }
        if let Some(gpu) = self.gpu {
            vars.push(("VRAMSCOPE_GPU", gpu.to_string()));
        }
        if let Some(rank) = self.rank {
            vars.push(("VRAMSCOPE_RANK", rank.to_string()));
        }
        if let Some(job) = self.job.as_deref().filter(|j| !j.is_empty()) {
            vars.push(("VRAMSCOPE_JOB", one_line(job)));
        }
        vars
    }
}

/// Foreign text made safe for a variable or a status line.
pub fn one_line(text: &str) -> String {
    crate::text::clean(text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_text_is_escaped_in_json_and_cleaned_in_the_environment() {
        let mut event = Event::new(Kind::Oom, 5, "OOM in \u{1b}[31mx\u{202e}".into());
        event.job = Some("j\u{7}ob".into());
        event.pid = Some(42);
        // Escaped by JSON as it stands, and cleaned before any hook is told.
        assert!(event.json().contains(r#""summary":"OOM in \u001b[31mx"#));
        let event = event.cleaned();
        let json = event.json();
        assert!(
            !json.contains('\u{202e}') && !json.contains("\\u001b"),
            "{json}"
        );
        let env = event.environment();
        let get = |k| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        assert_eq!(get("VRAMSCOPE_PID").as_deref(), Some("42"));
        assert!(!get("VRAMSCOPE_SUMMARY").unwrap().contains('\u{1b}'));
        assert!(!get("VRAMSCOPE_SUMMARY").unwrap().contains('\u{202e}'));
        assert!(!get("VRAMSCOPE_JOB").unwrap().contains('\u{7}'));
        assert_eq!(get("VRAMSCOPE_GPU"), None);
    }
}
