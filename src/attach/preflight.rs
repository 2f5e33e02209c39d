//! Before touching the target: what stands in the way of attaching, as one line with the fix.
//! Every check reads /proc or /proc/sys only; nothing here stops or signals the process.

use super::target::Target;

/// What this process may do, read once.
#[derive(Debug, Clone, Copy)]
pub struct Rights {
    pub euid: u32,
    /// CAP_SYS_PTRACE in the effective set.
    pub cap_sys_ptrace: bool,
    /// /proc/sys/kernel/yama/ptrace_scope, when Yama is there.
    pub yama: Option<u32>,
    pub in_container: bool,
}

impl Rights {
    pub fn current() -> Rights {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let cap_eff = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0);
        let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
            .ok()
            .and_then(|s| s.trim().parse().ok());
        let in_container = std::path::Path::new("/.dockerenv").exists()
            || std::path::Path::new("/run/.containerenv").exists()
            || std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
        Rights {
            euid: crate::channel::euid(),
            cap_sys_ptrace: cap_eff & (1 << 19) != 0,
            yama,
            in_container,
        }
    }
}

/// The line saying `target` is no Python process, when it is not one: it runs no Python
/// executable and maps no libpython. (Its memory map must have been read.)
pub fn not_python(target: &Target) -> Option<String> {
    if target.python_file().is_some() {
        return None;
    }
    let what = target.exe.rsplit('/').next().unwrap_or("?");
    Some(format!(
        "process {} is not a Python process (it runs {}, and maps no libpython): vramscope attaches to CPython only",
        target.pid,
        crate::channel::sanitize(what.as_bytes())
    ))
}

/// The one line saying why `target` cannot be attached to, and how to fix it; None when
/// nothing stands in the way. `ancestor`: whether we are an ancestor of the target (Yama 1
/// allows those).
pub fn obstacle(target: &Target, rights: &Rights, ancestor: bool) -> Option<String> {
    let pid = target.pid;
    match target.state {
        'Z' | 'X' => {
            return Some(format!(
                "process {pid} has exited (a zombie its parent has not reaped): nothing to attach to"
            ));
        }
        'T' => {
            return Some(format!(
                "process {pid} is stopped (job control): resume it first with `kill -CONT {pid}`"
            ));
        }
        _ => {}
    }
    if target.tracer != 0 {
        return Some(format!(
            "process {pid} is already traced by process {} (a debugger, py-spy or strace): detach that first",
            target.tracer
        ));
    }
    if !rights.cap_sys_ptrace && target.uid != rights.euid {
        let how = if rights.in_container {
            "run vramscope as its user, or as root: `sudo vramscope attach PID` (in a container, one with CAP_SYS_PTRACE: `--cap-add=SYS_PTRACE`)"
        } else {
            "run vramscope as its user, or as root: `sudo vramscope attach PID`"
        };
        return Some(format!(
            "process {pid} belongs to uid {}, not to you (uid {}): {}",
            target.uid,
            rights.euid,
            how.replace("PID", &pid.to_string())
        ));
    }
    if target.mapped.is_empty() {
        return Some(format!(
            "cannot read process {pid}'s memory map (/proc/{pid}/maps): run vramscope as its user or as root"
        ));
    }
    if let Some(why) = not_python(target) {
        return Some(why);
    }
    if let Some((major, minor)) = target.python_version()
        && (major, minor) < (3, 8)
    {
        return Some(format!(
            "process {pid} runs Python {major}.{minor}: the writer needs Python 3.8 or later"
        ));
    }
    let (flags, x) = options(&target.args);
    // -E and -I make the interpreter ignore PYTHON* variables: this one too (measured, 3.14).
    let reads_env = !flags.contains(&'E') && !flags.contains(&'I');
    if reads_env
        && target
            .env("PYTHON_DISABLE_REMOTE_DEBUG")
            .is_some_and(|v| !v.is_empty())
    {
        return Some(format!(
            "process {pid} disables remote debugging (PYTHON_DISABLE_REMOTE_DEBUG in its environment): restart it without it, or under `vramscope run`"
        ));
    }
    if x.iter()
        .any(|x| x.split('=').next() == Some("disable-remote-debug"))
    {
        return Some(format!(
            "process {pid} disables remote debugging (-X disable-remote-debug): restart it without it, or under `vramscope run`"
        ));
    }
    if let Some(v) = target.env("VRAMSCOPE_DISABLE")
        && matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    {
        return Some(format!(
            "process {pid} has VRAMSCOPE_DISABLE={v} in its environment: its writer stays off"
        ));
    }
    match rights.yama {
        Some(3) => {
            return Some(
                "ptrace is disabled on this machine (kernel.yama.ptrace_scope = 3, which only a reboot lowers): attach is impossible; start the job under `vramscope run`".to_string(),
            );
        }
        Some(2) if !rights.cap_sys_ptrace => {
            return Some(format!(
                "kernel.yama.ptrace_scope = 2 allows ptrace to CAP_SYS_PTRACE only: `sudo vramscope attach {pid}`"
            ));
        }
        Some(1) if !rights.cap_sys_ptrace && !ancestor => {
            return Some(format!(
                "kernel.yama.ptrace_scope = 1 allows ptrace of your own descendants only: `sudo vramscope attach {pid}`, or `sudo sysctl kernel.yama.ptrace_scope=0`"
            ));
        }
        _ => {}
    }
    None
}

/// A CPython command line's one-letter flags and its `-X` options (`-X opt`, `-Xopt`, and
/// inside a cluster of flags: `-uXopt`), up to the first argument that is the program
/// (`-c`, `-m`, a script, `-`, `--`). The interpreter's own `argv[0]` is skipped.
fn options(args: &[String]) -> (Vec<char>, Vec<String>) {
    let mut letters = Vec::new();
    let mut out = Vec::new();
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        let Some(flags) = arg.strip_prefix('-') else {
            break;
        };
        if flags.is_empty() || flags.starts_with('-') {
            break;
        }
        for (i, c) in flags.char_indices() {
            match c {
                // These take the rest of the argument, or the next one, as their value.
                'X' | 'W' | 'c' | 'm' => {
                    let value = match &flags[i + 1..] {
                        "" => rest.next().cloned(),
                        v => Some(v.to_string()),
                    };
                    if c == 'X' {
                        out.extend(value);
                    }
                    if matches!(c, 'c' | 'm') {
                        return (letters, out);
                    }
                    break;
                }
                c => letters.push(c),
            }
        }
    }
    (letters, out)
}

#[cfg(test)]
fn x_options(args: &[String]) -> Vec<String> {
    options(args).1
}

/// After a refused `PTRACE_SEIZE`, the likeliest reason, with its fix.
pub fn refused(pid: i32, rights: &Rights) -> String {
    if rights.in_container && !rights.cap_sys_ptrace {
        format!(
            "ptrace of process {pid} was refused: this container lacks SYS_PTRACE (run it with `--cap-add=SYS_PTRACE`, and seccomp allowing ptrace)"
        )
    } else {
        format!(
            "ptrace of process {pid} was refused (a security module or seccomp): `sudo vramscope attach {pid}`"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python(pid: i32) -> Target {
        Target {
            pid,
            state: 'S',
            uid: 1000,
            tracer: 0,
            command: "python train.py".into(),
            environ: vec!["HOME=/home/a".into()],
            args: vec!["python".into(), "train.py".into()],
            mapped: vec![(0x1000, "/usr/bin/python3.11".into())],
            exe: "/usr/bin/python3.11".into(),
            other_pid_namespace: false,
        }
    }

    fn me(uid: u32) -> Rights {
        Rights {
            euid: uid,
            cap_sys_ptrace: uid == 0,
            yama: None,
            in_container: false,
        }
    }

    #[test]
    fn a_python_process_of_ours_has_no_obstacle() {
        assert_eq!(obstacle(&python(7), &me(1000), false), None);
        assert_eq!(python(7).python_version(), Some((3, 11)));
    }

    #[test]
    fn each_obstacle_says_its_fix() {
        let cases: Vec<(Target, Rights, &str)> = vec![
            (
                {
                    let mut t = python(7);
                    t.state = 'Z';
                    t
                },
                me(1000),
                "has exited",
            ),
            (
                {
                    let mut t = python(7);
                    t.state = 'T';
                    t
                },
                me(1000),
                "kill -CONT 7",
            ),
            (
                {
                    let mut t = python(7);
                    t.tracer = 99;
                    t
                },
                me(1000),
                "traced by process 99",
            ),
            (
                {
                    let mut t = python(7);
                    t.exe = "/usr/bin/sleep".into();
                    t.mapped = vec![(1, "/usr/bin/sleep".into())];
                    t
                },
                me(1000),
                "not a Python process (it runs sleep",
            ),
            (
                {
                    let mut t = python(7);
                    t.environ.push("PYTHON_DISABLE_REMOTE_DEBUG=1".into());
                    t
                },
                me(1000),
                "PYTHON_DISABLE_REMOTE_DEBUG",
            ),
            (
                {
                    let mut t = python(7);
                    t.args = vec!["python".into(), "-X".into(), "disable-remote-debug".into()];
                    t
                },
                me(1000),
                "-X disable-remote-debug",
            ),
            (
                {
                    let mut t = python(7);
                    t.uid = 1001;
                    t
                },
                me(1000),
                "sudo vramscope attach 7",
            ),
            (
                {
                    let mut t = python(7);
                    t.mapped = vec![(1, "/usr/lib/libpython2.7.so.1.0".into())];
                    t
                },
                me(1000),
                "Python 2.7",
            ),
            (
                python(7),
                Rights {
                    yama: Some(1),
                    ..me(1000)
                },
                "ptrace_scope = 1",
            ),
            (
                python(7),
                Rights {
                    yama: Some(2),
                    ..me(1000)
                },
                "ptrace_scope = 2",
            ),
            (
                python(7),
                Rights {
                    yama: Some(3),
                    ..me(0)
                },
                "ptrace_scope = 3",
            ),
            (
                {
                    let mut t = python(7);
                    t.uid = 1001;
                    t
                },
                Rights {
                    in_container: true,
                    ..me(1000)
                },
                "--cap-add=SYS_PTRACE",
            ),
        ];
        for (t, r, want) in cases {
            let line = obstacle(&t, &r, false).unwrap_or_default();
            assert!(line.contains(want), "{want:?} not in {line:?}");
            assert!(!line.contains('\n'));
        }
        // Root passes Yama 1 and 2, and another user's process.
        let mut other = python(7);
        other.uid = 1001;
        assert_eq!(
            obstacle(
                &other,
                &Rights {
                    yama: Some(2),
                    ..me(0)
                },
                false
            ),
            None
        );
        // Yama 1 lets an ancestor through.
        assert_eq!(
            obstacle(
                &python(7),
                &Rights {
                    yama: Some(1),
                    ..me(1000)
                },
                true
            ),
            None
        );
    }

    #[test]
    fn x_options_are_read_as_the_interpreter_reads_them() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            x_options(&args(&[
                "python3", "-X", "a", "-Xb", "-uXc=1", "-W", "x", "t.py", "-X", "d"
            ])),
            ["a", "b", "c=1"]
        );
        // After -c or -m, what follows belongs to the program.
        assert_eq!(
            x_options(&args(&["python3", "-c", "-X", "-X", "e"])),
            Vec::<String>::new()
        );
        assert_eq!(
            x_options(&args(&["python3", "-Bm", "mod", "-Xf"])),
            Vec::<String>::new()
        );
        // The underscore spelling is not the option's name: 3.14 ignores it, and so does this.
        let mut t = python(7);
        t.args = args(&["python3", "-X", "disable_remote_debug", "t.py"]);
        assert_eq!(obstacle(&t, &me(1000), false), None);
        t.args = args(&["python3", "-uXdisable-remote-debug", "t.py"]);
        assert!(
            obstacle(&t, &me(1000), false).is_some_and(|l| l.contains("-X disable-remote-debug"))
        );
        // -E and -I: the interpreter ignores PYTHON_DISABLE_REMOTE_DEBUG, and so does this.
        t.environ.push("PYTHON_DISABLE_REMOTE_DEBUG=1".into());
        for flags in ["-E", "-uI", "-sE"] {
            t.args = args(&["python3", flags, "t.py"]);
            assert_eq!(obstacle(&t, &me(1000), false), None, "{flags}");
        }
        // A -E after the script is the program's own argument.
        t.args = args(&["python3", "-u", "t.py", "-E"]);
        assert!(
            obstacle(&t, &me(1000), false)
                .is_some_and(|l| l.contains("PYTHON_DISABLE_REMOTE_DEBUG"))
        );
    }
}
