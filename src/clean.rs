//! `vramscope clean`: removes now the channel files whose writers ended over an hour ago,
//! and the memory snapshots left an hour or more by writers whose channel is gone, and says
//! which. The monitor does the same every minute, for the files of the user it runs
//! as only: as root it reads every user's channels but removes none of theirs uninvited.
//! `--all-users` is how an administrator asks for the rest.

use crate::channel::cleaning::{self, Owners};
use crate::channel::{Policy, sanitize};
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

pub fn run(all_users: bool) -> ExitCode {
    let euid = Policy::current().euid;
    if all_users && euid != 0 {
        eprintln!("vramscope: clean --all-users needs root (other users' files are theirs)");
        return ExitCode::from(2);
    }
    let owners = if all_users {
        Owners::Everyone
    } else {
        Owners::Ours
    };
    let mut said = String::new();
    let (mut removed, mut snapshots) = (0_usize, 0_usize);
    // Each directory opened once and checked on its descriptor; removal is relative to it.
    for dir in cleaning::cleaning_dirs(euid) {
        for path in cleaning::remove_stale_in(&dir, euid, cleaning::STALE_AFTER, owners) {
            // A file's name is its owner's text: no control character reaches the terminal.
            said.push_str(&format!(
                "removed {}\n",
                sanitize(path.as_os_str().as_bytes())
            ));
            if path.extension().is_some_and(|e| e == "pickle") {
                snapshots += 1;
            } else {
                removed += 1;
            }
        }
    }
    let whose = if all_users {
        "any user's"
    } else {
        "this user's"
    };
    let snapshots = if snapshots > 0 {
        format!(" and {snapshots} memory snapshot(s) of ended writers")
    } else {
        String::new()
    };
    said.push_str(&format!(
        "{removed} ended channel file(s){snapshots} of {whose} removed\n"
    ));
    // Said once the files are gone: a full disk or a closed pipe ends it as any printing
    // command ends (`stdout`), never in a panic.
    match crate::stdout::print(&said) {
        Ok(()) => ExitCode::SUCCESS,
        Err(status) => status,
    }
}
