//! Where the log goes: the file named, or for `auto` the XDG state directory.

use std::path::PathBuf;

/// `auto`: `$XDG_STATE_HOME/vramscope/vramscope.log`, else `~/.local/state/vramscope/...`
/// (a relative `XDG_STATE_HOME` is ignored, as the XDG specification says); anything else is
/// the file's path.
pub fn resolve(
    arg: &std::path::Path,
    state_home: Option<&str>,
    home: Option<&str>,
) -> Result<PathBuf, String> {
    if arg != std::path::Path::new("auto") {
        return Ok(arg.to_path_buf());
    }
    let base = match (state_home.filter(|s| s.starts_with('/')), home) {
        (Some(state), _) => PathBuf::from(state),
        (None, Some(home)) if home.starts_with('/') => PathBuf::from(home).join(".local/state"),
        _ => {
            return Err(
                "--monitor-log auto needs XDG_STATE_HOME or HOME to find the state directory"
                    .to_string(),
            );
        }
    };
    Ok(base.join("vramscope").join("vramscope.log"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn auto_is_the_xdg_state_directory_else_home() {
        let auto = Path::new("auto");
        assert_eq!(
            resolve(auto, Some("/s"), Some("/h")),
            Ok(PathBuf::from("/s/vramscope/vramscope.log"))
        );
        assert_eq!(
            resolve(auto, Some("rel"), Some("/h")),
            Ok(PathBuf::from("/h/.local/state/vramscope/vramscope.log"))
        );
        assert!(resolve(auto, None, None).is_err());
        assert_eq!(
            resolve(Path::new("x.log"), None, None),
            Ok(PathBuf::from("x.log"))
        );
    }
}
