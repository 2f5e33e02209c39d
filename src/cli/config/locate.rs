//! Which configuration file a run reads: the one `--config` (or `VRAMSCOPE_CONFIG`) names,
//! none for `none`, else the XDG location when a file is there.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// What `--config` says, and whether a missing file is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chosen {
    /// `--config none`: no file.
    Nothing,
    /// Named: it must exist.
    Named(PathBuf),
    /// The XDG location: read when it exists.
    Usual(PathBuf),
}

/// The file to read given `--config` and the variables `XDG_CONFIG_HOME` and `HOME`.
/// An `XDG_CONFIG_HOME` that is not absolute is ignored, as the XDG specification says.
pub fn choose(
    given: Option<&Path>,
    xdg_config_home: Option<&OsStr>,
    home: Option<&OsStr>,
) -> Chosen {
    if let Some(given) = given {
        if given.as_os_str() == "none" {
            return Chosen::Nothing;
        }
        return Chosen::Named(given.to_path_buf());
    }
    let base = xdg_config_home
        .map(Path::new)
        .filter(|p| p.is_absolute())
        .map(Path::to_path_buf)
        .or_else(|| {
            home.map(Path::new)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".config"))
        });
    match base {
        Some(base) => Chosen::Usual(base.join("vramscope").join("config.toml")),
        None => Chosen::Nothing,
    }
}

impl Chosen {
    /// The file to read, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Chosen::Nothing => None,
            Chosen::Named(path) | Chosen::Usual(path) => Some(path),
        }
    }

    /// Whether a missing file is no file (the usual location) rather than an error. Whether
    /// it is there is learnt by the one open that reads it, never by a look beforehand.
    pub fn missing_ok(&self) -> bool {
        matches!(self, Chosen::Usual(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(s: &str) -> Option<&OsStr> {
        Some(OsStr::new(s))
    }

    #[test]
    fn the_named_file_beats_the_xdg_location_and_none_reads_nothing() {
        assert_eq!(
            choose(Some(Path::new("my.toml")), os("/x"), os("/home/a")),
            Chosen::Named("my.toml".into())
        );
        assert_eq!(
            choose(Some(Path::new("none")), os("/x"), os("/home/a")),
            Chosen::Nothing
        );
    }

    #[test]
    fn xdg_config_home_then_home_dot_config() {
        assert_eq!(
            choose(None, os("/cfg"), os("/home/a")),
            Chosen::Usual("/cfg/vramscope/config.toml".into())
        );
        assert_eq!(
            choose(None, None, os("/home/a")),
            Chosen::Usual("/home/a/.config/vramscope/config.toml".into())
        );
        assert_eq!(
            choose(None, os("relative"), os("/home/a")),
            Chosen::Usual("/home/a/.config/vramscope/config.toml".into()),
            "a relative XDG_CONFIG_HOME is ignored"
        );
        assert_eq!(choose(None, None, None), Chosen::Nothing);
    }

    #[test]
    fn a_missing_usual_file_is_no_file_but_a_missing_named_one_is_read() {
        let usual = Chosen::Usual("/x/config.toml".into());
        assert_eq!(usual.path(), Some(Path::new("/x/config.toml")));
        assert!(usual.missing_ok());
        let named = Chosen::Named("gone.toml".into());
        assert!(!named.missing_ok(), "reading it will say it is missing");
        assert_eq!(Chosen::Nothing.path(), None);
    }
}
