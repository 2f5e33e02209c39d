//! The reader's two dealings with a writer's memory snapshots (spec §2.3, §2.8): asking for
//! one, by raising the control block's snapshot requests by one (the only bytes a reader ever
//! writes), and turning the name a `SNAPSHOT_WRITTEN` event announces into a path beside the
//! channel, refusing any name that could lead elsewhere.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::copies::read_exact_at;
use super::decode::{u32_at, u64_at};
use super::layout::{control, flags, header, state};
use super::validate;

/// Asks the writer of the channel at `path` for a memory snapshot: reads the count of
/// requests and stores it plus one. `euid` is the reader's: the file must be a channel it may
/// read, as `Channel::open` checks (only root may touch another user's). Refused, in one
/// line, unless the writer set `SITES` (it would never answer) and still runs. Two readers
/// racing may merge their requests into one, which the spec allows. Returns the new count.
pub fn request_snapshot(path: &Path, euid: u32) -> Result<u64, String> {
    // Its directory by descriptor, the file relative to it (`open_channel_file`): the 8
    // bytes written land in the file that was checked, whatever is swapped meanwhile.
    let file = super::dir::open_channel_file(path, euid, true).map_err(|n| n.why)?;
    let meta = file.metadata().map_err(|e| format!("cannot stat: {e}"))?;
    validate::file(&meta, euid)?;
    let mut head = [0u8; header::SIZE];
    read_exact_at(&file, &mut head, 0)?;
    validate::header(&head, meta.len())?;
    if u32_at(&head, header::FLAGS) & flags::SITES == 0 {
        return Err(
            "its writer records no allocation history: start it with vramscope run --sites".into(),
        );
    }
    let st = u64_at(&head, header::STATE);
    if st != state::RUNNING {
        return Err("its writer no longer runs".into());
    }
    let mut word = [0u8; 8];
    let at = control::SNAPSHOT_REQUESTS as u64;
    read_exact_at(&file, &mut word, at)?;
    let next = u64::from_le_bytes(word).saturating_add(1);
    file.write_all_at(&next.to_le_bytes(), at)
        .map_err(|e| format!("cannot write the request: {e}"))?;
    Ok(next)
}

/// The path of the snapshot file a `SNAPSHOT_WRITTEN` event names, beside the channel at
/// `channel`. `name` is the event's text as decoded and `intact` whether decoding kept every
/// byte (no control character, NUL or invalid UTF-8 was withheld). A name is a file name
/// only: one with `/`, `..`, a leading dot, a control character or NUL is refused in one line.
pub fn snapshot_path(channel: &Path, name: &str, intact: bool) -> Result<PathBuf, String> {
    if !intact {
        return Err("snapshot name refused: it holds control characters or invalid UTF-8".into());
    }
    if name.is_empty() {
        return Err("snapshot name refused: empty".into());
    }
    if name.contains('/') || name.contains('\0') || name.contains("..") || name.starts_with('.') {
        return Err(format!(
            "snapshot name refused: {name:?} is not a plain file name"
        ));
    }
    if name.chars().any(|c| c.is_control()) || !crate::text::is_clean(name) {
        return Err("snapshot name refused: it holds control characters".into());
    }
    let dir = channel
        .parent()
        .ok_or_else(|| "the channel has no directory".to_string())?;
    Ok(dir.join(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_file_names_become_paths_beside_the_channel() {
        let ch = Path::new("/dev/shm/vramscope-1/7-9.vsc");
        assert_eq!(
            snapshot_path(ch, "7-9.vsc.snap-1-peak.pickle", true).unwrap(),
            Path::new("/dev/shm/vramscope-1/7-9.vsc.snap-1-peak.pickle")
        );
        for bad in ["../../etc/x", "a/b", "..", ".hidden", ""] {
            let why = snapshot_path(ch, bad, true).unwrap_err();
            assert!(why.starts_with("snapshot name refused"), "{bad}: {why}");
        }
        assert!(snapshot_path(ch, "a\u{1b}b", true).is_err());
        assert!(snapshot_path(ch, "clean-looking", false).is_err());
    }
}
