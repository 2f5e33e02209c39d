//! What `--ssh` runs: the hosts as the user named them, and the command line of the user's
//! own OpenSSH client for each (their `~/.ssh/config`, keys, agent and jump hosts apply).
//!
//! A destination is handed to ssh after `--`, and refused here if it could still be read as
//! an option or carries white space or control characters; the remote command is built from
//! fixed words and a `--ssh-vramscope` path of plain characters only, because ssh hands the
//! command to the remote user's shell as one string.

use crate::safe_fs::bounds::MAX_SSH_HOSTS;
use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

/// `--ssh`'s list: `[user@]host` entries (anything ssh's config knows as a `Host`),
/// separated by commas or white space.
pub fn parse_hosts(text: &str) -> Result<Vec<String>, String> {
    let mut hosts: Vec<String> = Vec::new();
    for entry in text.split([',', ' ', '\t', '\n']).filter(|e| !e.is_empty()) {
        let shown = crate::text::clean(entry);
        if entry.starts_with('-') {
            return Err(format!("`{shown}` is not a host (it starts with -)"));
        }
        if !entry.chars().all(|c| c.is_ascii_graphic()) {
            return Err(format!(
                "`{shown}` is not a host (only printable ASCII without spaces)"
            ));
        }
        if hosts.iter().any(|h| h == entry) {
            return Err(format!("`{shown}` is named twice"));
        }
        if hosts.len() == MAX_SSH_HOSTS {
            return Err(format!(
                "more than {MAX_SSH_HOSTS} hosts (the most one --ssh may name)"
            ));
        }
        hosts.push(entry.to_string());
    }
    if hosts.is_empty() {
        return Err("no hosts given".into());
    }
    Ok(hosts)
}

/// `--ssh-vramscope`: the remote program, a path of plain characters (a leading `~/` is the
/// remote home, as the remote shell expands it).
pub fn parse_remote_program(text: &str) -> Result<String, String> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._+-~".contains(c);
    if text.is_empty() || text.starts_with('-') || !text.chars().all(plain) {
        return Err(format!(
            "`{}` is not a program path (letters, digits and / . _ + - ~ only)",
            crate::text::clean(text)
        ));
    }
    Ok(text.to_string())
}

/// How each host is reached.
#[derive(Clone, Debug)]
pub struct SshSetup {
    /// The remote program (`vramscope` on the remote PATH by default).
    pub program: String,
    /// The remote `--loop` period: the cluster's refresh.
    pub interval: Duration,
    /// ssh's `ConnectTimeout`.
    pub connect_timeout: Duration,
}

impl SshSetup {
    /// The remote command: one `vramscope.snapshot` document a line, every interval.
    pub fn remote_command(&self) -> String {
        format!(
            "{} --json --loop {}ms",
            self.program,
            self.interval.as_millis().max(100)
        )
    }

    /// ssh's arguments for `host`, its control socket in `control_dir` (a folder of this
    /// run's own), then the remote command.
    pub fn session_args(&self, host: &str, control_dir: &Path) -> Vec<OsString> {
        let mut args = self.options(control_dir);
        args.extend(["-T".into(), "--".into(), host.into()]);
        args.push(self.remote_command().into());
        args
    }

    /// ssh's arguments asking the master connection of `host` to exit.
    pub fn exit_args(&self, host: &str, control_dir: &Path) -> Vec<OsString> {
        let mut args = self.options(control_dir);
        args.extend(["-O".into(), "exit".into(), "--".into(), host.into()]);
        args
    }

    fn options(&self, control_dir: &Path) -> Vec<OsString> {
        let seconds = self.connect_timeout.as_secs().max(1);
        let mut control_path = OsString::from("ControlPath=");
        // %C: a hash of the destination, short enough for a socket's path.
        control_path.push(control_dir.join("%C"));
        let mut args: Vec<OsString> = Vec::new();
        for option in [
            // Never a prompt: a host that wants a password or a host key answer fails, and
            // says so, instead of waiting on a terminal nobody watches.
            "BatchMode=yes".into(),
            format!("ConnectTimeout={seconds}"),
            // ssh ends a connection whose peer stopped answering (the stall check here
            // ends the session sooner).
            format!("ServerAliveInterval={seconds}"),
            "ServerAliveCountMax=3".into(),
            // One master connection per host, in a folder of this run's own (never the
            // user's shared socket: a stalled session is killed here, theirs must not be),
            // kept a minute so a reconnect after the remote program ended needs no new
            // login; the run asks each to exit when it ends.
            "ControlMaster=auto".into(),
            "ControlPersist=60".into(),
        ] {
            args.push("-o".into());
            args.push(option.into());
        }
        args.push("-o".into());
        args.push(control_path);
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_lists_refuse_what_ssh_would_read_as_an_option() {
        assert_eq!(
            parse_hosts("a, ann@b\tc").unwrap(),
            ["a", "ann@b", "c"].map(String::from)
        );
        assert_eq!(
            parse_hosts("a,-oProxyCommand=x").unwrap_err(),
            "`-oProxyCommand=x` is not a host (it starts with -)"
        );
        assert_eq!(
            parse_hosts("a\u{1b}[2J").unwrap_err(),
            "`a\u{FFFD}[2J` is not a host (only printable ASCII without spaces)"
        );
        assert_eq!(parse_hosts("a,a").unwrap_err(), "`a` is named twice");
        assert_eq!(parse_hosts(" , ").unwrap_err(), "no hosts given");
        let many: Vec<String> = (0..=MAX_SSH_HOSTS).map(|i| format!("h{i}")).collect();
        assert!(parse_hosts(&many.join(",")).is_err());
    }

    #[test]
    fn the_remote_program_is_plain_characters_only() {
        assert_eq!(
            parse_remote_program("~/.cargo/bin/vramscope").unwrap(),
            "~/.cargo/bin/vramscope"
        );
        for bad in ["vramscope; rm -rf ~", "$(id)", "-x", "", "a b"] {
            assert!(parse_remote_program(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_session_runs_batch_mode_with_a_private_control_path() {
        let setup = SshSetup {
            program: "vramscope".into(),
            interval: Duration::from_millis(1500),
            connect_timeout: Duration::from_secs(2),
        };
        let args: Vec<String> = setup
            .session_args("ann@box", Path::new("/run/x"))
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        let joined = args.join(" ");
        assert!(joined.contains("-o BatchMode=yes"), "{joined}");
        assert!(joined.contains("-o ConnectTimeout=2"), "{joined}");
        assert!(joined.contains("-o ControlPath=/run/x/%C"), "{joined}");
        assert!(
            joined.ends_with("-T -- ann@box vramscope --json --loop 1500ms"),
            "{joined}"
        );
    }
}
