//! Whose directories and files a privileged caller may rely on: owned by root or by the one
//! user whose files they are, and writable by no one else (a shared folder with the sticky
//! bit, such as /tmp, lets no one replace another's entry, so it passes as a folder). Checked
//! on what `fstat` says of a descriptor, never on a path.

use super::stat::{Kind, Stat};

const GROUP_OR_OTHER_WRITE: u32 = 0o022;
const STICKY: u32 = 0o1000;

/// The rule a walk or an open applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// Nothing is checked: the caller is not privileged, so every file it reaches is one its
    /// user could reach anyway.
    Anyone,
    /// Owned by root or by `uid` (root itself: `uid` 0), writable by no one else.
    OwnedBy(u32),
}

impl Trust {
    /// What a process with effective uid `euid` must check: everything as root, nothing
    /// otherwise.
    pub fn for_euid(euid: u32) -> Trust {
        if euid == 0 {
            Trust::OwnedBy(0)
        } else {
            Trust::Anyone
        }
    }

    /// Whether anything is checked.
    pub fn checks(&self) -> bool {
        matches!(self, Trust::OwnedBy(_))
    }

    fn owner_ok(&self, st: &Stat) -> Option<String> {
        match self {
            Trust::Anyone => None,
            Trust::OwnedBy(uid) if st.uid == 0 || st.uid == *uid => None,
            Trust::OwnedBy(_) => Some(format!("belongs to uid {}", st.uid)),
        }
    }

    /// Why a folder on the way may not be relied on, if it may not.
    pub fn folder(&self, st: &Stat) -> Option<String> {
        if !self.checks() {
            return None;
        }
        if st.kind != Kind::Dir {
            return Some("is not a folder".to_string());
        }
        self.owner_ok(st).or_else(|| {
            (st.mode & GROUP_OR_OTHER_WRITE != 0 && st.mode & STICKY == 0)
                .then(|| format!("may be written by others (mode {:o})", st.mode))
        })
    }

    /// Why the file at the end may not be relied on, if it may not: also a regular file with
    /// one link (a hard link made to another file elsewhere is another name for that file).
    pub fn file(&self, st: &Stat) -> Option<String> {
        if !self.checks() {
            return None;
        }
        if st.kind != Kind::File {
            return Some("is not a regular file".to_string());
        }
        self.owner_ok(st).or_else(|| {
            if st.mode & GROUP_OR_OTHER_WRITE != 0 {
                Some(format!("may be written by others (mode {:o})", st.mode))
            } else if st.nlink > 1 {
                Some(format!("has {} hard links", st.nlink))
            } else {
                None
            }
        })
    }

    /// Why a symlink met on the way may not be followed, if it may not: only one whose owner
    /// is trusted (its folder was checked before it was read).
    pub fn link(&self, st: &Stat) -> Option<String> {
        self.owner_ok(st)
            .map(|why| format!("is a symlink that {why}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(kind: Kind, uid: u32, mode: u32) -> Stat {
        Stat {
            kind,
            uid,
            gid: 0,
            mode,
            nlink: 1,
            size: 0,
            mtime: 0,
            dev: 0,
            ino: 0,
        }
    }

    #[test]
    fn a_folder_is_trusted_when_its_owner_is_and_nobody_else_may_write_unless_sticky() {
        let root = Trust::OwnedBy(0);
        assert_eq!(root.folder(&stat(Kind::Dir, 0, 0o755)), None);
        assert_eq!(root.folder(&stat(Kind::Dir, 0, 0o1777)), None, "/tmp");
        assert_eq!(
            root.folder(&stat(Kind::Dir, 0, 0o777)).as_deref(),
            Some("may be written by others (mode 777)")
        );
        assert_eq!(
            root.folder(&stat(Kind::Dir, 1000, 0o700)).as_deref(),
            Some("belongs to uid 1000")
        );
        assert_eq!(
            Trust::OwnedBy(1000).folder(&stat(Kind::Dir, 1000, 0o700)),
            None
        );
        assert_eq!(Trust::Anyone.folder(&stat(Kind::Dir, 1000, 0o777)), None);
    }

    #[test]
    fn a_file_must_be_regular_owned_unwritable_by_others_and_have_one_link() {
        let root = Trust::OwnedBy(0);
        assert_eq!(root.file(&stat(Kind::File, 0, 0o644)), None);
        assert!(root.file(&stat(Kind::File, 0, 0o666)).is_some());
        assert!(root.file(&stat(Kind::Fifo, 0, 0o644)).is_some());
        let mut linked = stat(Kind::File, 0, 0o644);
        linked.nlink = 2;
        assert_eq!(root.file(&linked).as_deref(), Some("has 2 hard links"));
        assert_eq!(
            root.link(&stat(Kind::Symlink, 1000, 0o777)).as_deref(),
            Some("is a symlink that belongs to uid 1000")
        );
        assert_eq!(Trust::for_euid(1000), Trust::Anyone);
    }
}
