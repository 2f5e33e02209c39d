//! Simulated hosts for `cluster --ssh`: one real OpenSSH `sshd` per host on its own loopback
//! port, with its own host key and `AuthorizedKeysFile`, the environment of commands run
//! through it set by `SetEnv` (the remote PATH, the fake NVML, the channels), and an `ssh`
//! wrapper first on the client's PATH that gives the real client a config naming each host,
//! as a user's `~/.ssh/config` would.

use std::ffi::OsString;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SSHD: &str = "/usr/sbin/sshd";

/// One host: its name in the client's config, and its sshd.
pub struct Host {
    pub name: String,
    pub port: u16,
    config: PathBuf,
    sshd: Option<Child>,
}

impl Host {
    /// Kills the sshd and every process under it (its connections' sessions and their
    /// remote programs), as a host going down would.
    pub fn kill(&mut self) {
        if let Some(mut sshd) = self.sshd.take() {
            let mut all = vec![sshd.id()];
            let mut at = 0;
            while at < all.len() {
                all.extend(children(all[at]));
                at += 1;
            }
            for pid in all.iter().rev() {
                // SAFETY: kill(2) with pids read just now from this sshd's process tree.
                unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
            }
            let _ = sshd.wait();
        }
    }

    /// Starts its sshd again on the same port.
    pub fn restart(&mut self) {
        self.sshd = Some(start_sshd(&self.config, self.port).expect("restart sshd"));
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A process's children, from /proc.
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// The hosts and the client's side.
pub struct Hosts {
    pub hosts: Vec<Host>,
    dir: tempfile::TempDir,
}

/// What runs on one host: `env` for its commands (`PATH` among them).
pub struct HostSpec {
    pub name: String,
    pub env: Vec<(String, String)>,
}

impl Hosts {
    /// Starts one sshd per spec; `Err` says why sshd cannot run here (the caller skips).
    pub fn start(specs: Vec<HostSpec>) -> Result<Hosts, String> {
        if !Path::new(SSHD).exists() {
            return Err(format!(
                "{SSHD} is not installed (apt-get install openssh-server)"
            ));
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let keygen = |path: &Path| {
            let status = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(path)
                .status()
                .map_err(|e| format!("ssh-keygen: {e}"))?;
            if status.success() {
                Ok(())
            } else {
                Err(format!("ssh-keygen failed: {status}"))
            }
        };
        let d = dir.path();
        keygen(&d.join("host_key"))?;
        keygen(&d.join("user_key"))?;
        std::fs::copy(d.join("user_key.pub"), d.join("authorized_keys"))
            .map_err(|e| e.to_string())?;
        // Privilege separation's folder, which the distribution's service makes at boot.
        if unsafe { libc::geteuid() } == 0 {
            let _ = std::fs::create_dir_all("/run/sshd");
        }
        let user = std::env::var("USER")
            .ok()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| {
                String::from_utf8_lossy(&Command::new("id").arg("-un").output().unwrap().stdout)
                    .trim()
                    .to_string()
            });
        let host_key =
            std::fs::read_to_string(d.join("host_key.pub")).map_err(|e| e.to_string())?;
        let mut client = String::new();
        let mut known = String::new();
        let mut hosts = Vec::new();
        for spec in specs {
            let config = d.join(format!("sshd_config-{}", spec.name));
            let env: Vec<String> = spec
                .env
                .iter()
                .map(|(k, v)| format!("\"{k}={v}\""))
                .collect();
            let (sshd, port) = (0..5)
                .find_map(|_| {
                    let port = free_port();
                    std::fs::write(
                        &config,
                        format!(
                            "ListenAddress 127.0.0.1:{port}\nHostKey {}\nAuthorizedKeysFile {}\n\
                             StrictModes no\nUsePAM no\nPasswordAuthentication no\n\
                             KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n\
                             PidFile none\nSetEnv {}\n",
                            d.join("host_key").display(),
                            d.join("authorized_keys").display(),
                            env.join(" ")
                        ),
                    )
                    .ok()?;
                    start_sshd(&config, port).ok().map(|s| (s, port))
                })
                .ok_or_else(|| {
                    format!(
                        "sshd does not start here ({SSHD} -D -e -f {})",
                        config.display()
                    )
                })?;
            client.push_str(&format!(
                "Host {}\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n  IdentityFile {}\n  \
                 IdentitiesOnly yes\n  UserKnownHostsFile {}\n\n",
                spec.name,
                d.join("user_key").display(),
                d.join("known_hosts").display()
            ));
            known.push_str(&format!("[127.0.0.1]:{port} {host_key}"));
            hosts.push(Host {
                name: spec.name,
                port,
                config,
                sshd: Some(sshd),
            });
        }
        std::fs::write(d.join("ssh_config"), client).map_err(|e| e.to_string())?;
        std::fs::write(d.join("known_hosts"), known).map_err(|e| e.to_string())?;
        let bin = d.join("client-bin");
        std::fs::create_dir(&bin).map_err(|e| e.to_string())?;
        write_script(
            &bin.join("ssh"),
            &format!(
                "#!/bin/sh\nexec ssh-real -F {} \"$@\"\n",
                d.join("ssh_config").display()
            ),
        );
        let real = which("ssh").ok_or("no ssh client on PATH")?;
        std::os::unix::fs::symlink(real, bin.join("ssh-real")).map_err(|e| e.to_string())?;
        Ok(Hosts { hosts, dir })
    }

    /// The client's PATH: the wrapper first.
    pub fn client_path(&self) -> OsString {
        let mut path = OsString::from(self.dir.path().join("client-bin"));
        path.push(":");
        path.push(std::env::var_os("PATH").unwrap_or_default());
        path
    }

    /// A folder of the test's own, for the hosts' programs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// An address nothing listens on: a host that is down.
    pub fn add_down_host(&self, name: &str) {
        let port = free_port();
        let mut config = std::fs::read_to_string(self.dir.path().join("ssh_config")).unwrap();
        config.push_str(&format!(
            "Host {name}\n  HostName 127.0.0.1\n  Port {port}\n  BatchMode yes\n\n"
        ));
        std::fs::write(self.dir.path().join("ssh_config"), config).unwrap();
    }
}

/// Writes an executable script.
pub fn write_script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts sshd in the foreground, logging to stderr (dropped), and waits until it accepts
/// connections; `Err` when it exits first or never listens.
fn start_sshd(config: &Path, port: u16) -> Result<Child, String> {
    let mut child = Command::new(SSHD)
        .args(["-D", "-e", "-f"])
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{SSHD}: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("sshd exited: {status}"));
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(child);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    Err("sshd never listened".into())
}
