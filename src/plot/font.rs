//! The font PNG text is drawn with. plotters' `ab_glyph` renderer links no system font
//! library: it draws with font bytes registered at run time, so vramscope reads one file,
//! DejaVu Sans where distributions install it unless `--font` names another. SVG needs none:
//! its text is rendered by whatever displays it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where distributions install a sans-serif font: DejaVu Sans first (Debian and Ubuntu's
/// `fonts-dejavu-core`, Fedora, Arch, openSUSE), then Liberation Sans.
const SYSTEM_FONTS: [&str; 7] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
];

/// Larger than any sans-serif font file; a bigger one is not what it claims to be.
const MAX_FONT_BYTES: u64 = 64 << 20;

/// The registered font's path, or why there is none: registered once per process, since
/// plotters keeps fonts for the life of the process.
static REGISTERED: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// Registers `explicit`, else the first system font found, as plotters' sans-serif.
pub fn register(explicit: Option<&Path>) -> Result<PathBuf, String> {
    REGISTERED
        .get_or_init(|| match explicit {
            Some(path) => load(path).map(|()| path.to_path_buf()),
            None => SYSTEM_FONTS
                .iter()
                .map(Path::new)
                .find(|p| p.is_file())
                .ok_or_else(|| {
                    "PNG output needs a TrueType font and none was found (looked for DejaVu \
                     Sans under /usr/share/fonts): install fonts-dejavu-core, pass --font \
                     FILE.ttf, or write .svg instead"
                        .to_string()
                })
                .and_then(|p| load(p).map(|()| p.to_path_buf())),
        })
        .clone()
}

fn load(path: &Path) -> Result<(), String> {
    let refuse = |why: String| format!("cannot use the font {}: {why}", path.display());
    let size = std::fs::metadata(path)
        .map_err(|e| refuse(e.to_string()))?
        .len();
    if size > MAX_FONT_BYTES {
        return Err(refuse(format!("{size} bytes is too large for a font")));
    }
    let bytes = std::fs::read(path).map_err(|e| refuse(e.to_string()))?;
    // plotters keeps a registered font for the life of the process and asks for `'static`
    // bytes: leaking this one buffer, once, is exactly that.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font("sans-serif", plotters::style::FontStyle::Normal, bytes)
        .map_err(|_| refuse("not a TrueType or OpenType font".into()))
}
