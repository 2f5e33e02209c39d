//! Root's monitor takes no settings from a file another user could have written: a setting
//! picks the NVML library it loads (`nvml-lib`), and the screen root acts on (signals) must
//! not be steered by someone else. A file is trusted when it and every folder above it belong
//! to root and no one else may write them (a shared folder with the sticky bit, such as /tmp,
//! lets no one replace root's file, so it passes).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

const GROUP_OR_OTHER_WRITE: u32 = 0o022;
const STICKY: u32 = 0o1000;

/// Refuses `path` with one line saying why, when running as root (`euid` 0) and another user
/// could have written it; any file is fine for any other user.
pub fn check(path: &Path, euid: u32) -> Result<(), String> {
    if euid != 0 {
        return Ok(());
    }
    let shown = super::file::shown(path);
    let real = std::fs::canonicalize(path).map_err(|e| format!("{shown}: cannot read: {e}"))?;
    let mut folder = false;
    for at in real.ancestors() {
        let meta = std::fs::metadata(at).map_err(|e| format!("{shown}: cannot read: {e}"))?;
        let what = if folder {
            format!("its folder {}", super::file::shown(at))
        } else {
            "it".to_string()
        };
        let why = if meta.uid() != 0 {
            Some(format!("{what} belongs to uid {}", meta.uid()))
        } else if meta.mode() & GROUP_OR_OTHER_WRITE != 0 && !(folder && meta.mode() & STICKY != 0)
        {
            Some(format!(
                "{what} may be written by others (mode {:o})",
                meta.mode() & 0o7777
            ))
        } else {
            None
        };
        if let Some(why) = why {
            return Err(format!(
                "{shown}: refused: running as root, and {why}; root's monitor takes no settings \
                 another user could write (--config none reads no file)"
            ));
        }
        folder = true;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn any_file_is_fine_for_a_user_other_than_root() {
        assert_eq!(check(Path::new("/nonexistent/config.toml"), 1000), Ok(()));
    }

    /// Needs root to give a file away; CI runs as root.
    #[test]
    fn root_refuses_a_file_another_user_owns_or_may_write() {
        if crate::channel::sys::euid() != 0 {
            eprintln!("skipped: not root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, "").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(check(&file, 0), Ok(()), "root's own file in root's folders");

        std::os::unix::fs::chown(&file, Some(65534), None).unwrap();
        let owned = check(&file, 0).unwrap_err();
        assert!(
            owned.contains("refused: running as root, and it belongs to uid 65534"),
            "{owned}"
        );
        assert!(!owned.contains('\n'));

        std::os::unix::fs::chown(&file, Some(0), None).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        let written = check(&file, 0).unwrap_err();
        assert!(
            written.contains("it may be written by others (mode 666)"),
            "{written}"
        );

        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let folder = check(&file, 0).unwrap_err();
        assert!(folder.contains("and its folder "), "{folder}");
        assert!(
            folder.contains("may be written by others (mode 777)"),
            "{folder}"
        );

        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert_eq!(check(&file, 0), Ok(()), "a sticky shared folder, as /tmp");
    }
}
