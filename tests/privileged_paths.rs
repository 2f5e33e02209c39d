//! Root never works by path in a place a user controls (docs/threat-model.md): the modules
//! that run as root among other users' files do their file work through `src/safe_fs`
//! (a folder opened once and checked on its descriptor, everything relative to it). This test
//! reads their source and fails on any call that takes a path the kernel would resolve again:
//! a `std::fs` function on a path, `Path::exists`/`is_dir`/`is_file`, an `OpenOptions::open`,
//! `libc::open`/`mkdir`/`unlink`/`chown`/`rename`/`stat` on a path. A call that must take a
//! path (a /proc file the kernel owns, a folder root itself chose on its command line) says
//! why on its line or the line above, after `path-ok:`; test code and comments do not count.
//! It proves on made-up source that it sees what it must and ignores what it must.

use std::path::Path;

/// The modules that run as root and touch files users can name, create or swap.
const PRIVILEGED: &[&str] = &[
    "src/attach/agent.rs",
    "src/attach/mod.rs",
    "src/channel/cleaning.rs",
    "src/channel/discover.rs",
    "src/channel/reader.rs",
    "src/channel/request.rs",
    "src/clean.rs",
    "src/cli/config/file.rs",
    "src/cli/config/locate.rs",
    "src/cli/config/mod.rs",
    "src/cli/config/trust.rs",
    "src/log_file/mod.rs",
    "src/log_file/path.rs",
    "src/log_file/rotate.rs",
    "src/job/mod.rs",
    "src/memory_snapshot/file.rs",
    "src/recording/writer.rs",
    "src/sources/sites.rs",
];

/// Calls that resolve a path (each as it appears in code).
const BY_PATH: &[&str] = &[
    "fs::metadata(",
    "fs::symlink_metadata(",
    "canonicalize(",
    "File::open(",
    "File::create(",
    "OpenOptions::new()",
    "fs::read(",
    "fs::read_to_string(",
    "fs::write(",
    "fs::read_dir(",
    "fs::create_dir",
    "DirBuilder::",
    "fs::remove_file(",
    "fs::remove_dir",
    "fs::rename(",
    "fs::copy(",
    "fs::hard_link(",
    "fs::read_link(",
    "fs::set_permissions(",
    "fs::chown(",
    "fs::lchown(",
    ".exists()",
    ".is_dir()",
    ".is_file()",
    ".is_symlink()",
    "libc::open(",
    "libc::mkdir(",
    "libc::unlink(",
    "libc::rmdir(",
    "libc::chown(",
    "libc::lchown(",
    "libc::rename(",
    "libc::stat(",
    "libc::lstat(",
    "libc::access(",
];

const MARKER: &str = "path-ok:";

/// Blanks comments, strings and char literals, keeping every newline, so only code is read.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let blank = |out: &mut Vec<u8>, s: &[u8]| {
        out.extend(s.iter().map(|&c| if c == b'\n' { b'\n' } else { b' ' }))
    };
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            let end = b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |p| i + p);
            blank(&mut out, &b[i..end]);
            i = end;
        } else if b[i..].starts_with(b"/*") {
            let (mut depth, mut j) = (1, i + 2);
            while j < b.len() && depth > 0 {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, &b[i..j]);
            i = j;
        } else if b[i] == b'r'
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
            && b[i + 1..].iter().take_while(|&&c| c == b'#').count() + i + 1 < b.len()
            && b[i + 1 + b[i + 1..].iter().take_while(|&&c| c == b'#').count()] == b'"'
        {
            let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            let start = i + 2 + hashes;
            let end = b[start..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(b.len(), |p| start + p + close.len());
            blank(&mut out, &b[i..end]);
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(b.len());
            blank(&mut out, &b[i..end]);
            i = end;
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '\''), else a lifetime ('a), left as it is.
            let end = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..]
                    .iter()
                    .position(|&c| c == b'\'')
                    .map(|p| i + 2 + p + 1)
            } else {
                let ch = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch) == Some(&b'\'')).then_some(i + 2 + ch)
            };
            match end {
                Some(end) => {
                    blank(&mut out, &b[i..end]);
                    i = end;
                }
                None => {
                    out.push(b[i]);
                    i += 1;
                }
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Blanks every item under `#[cfg(test)]` (a test module, a test-only function).
fn without_tests(code: &str) -> String {
    let mut out = code.to_string();
    let mut from = 0;
    while let Some(at) = out[from..].find("#[cfg(test)]").map(|p| from + p) {
        let bytes = out.as_bytes();
        let Some(open) = bytes[at..]
            .iter()
            .position(|&c| c == b'{' || c == b';')
            .map(|p| at + p)
        else {
            break;
        };
        let mut end = open + 1;
        if bytes[open] == b'{' {
            let mut depth = 1;
            while end < bytes.len() && depth > 0 {
                match bytes[end] {
                    b'{' => depth += 1,
                    b'}' => depth -= 1,
                    _ => {}
                }
                end += 1;
            }
        }
        let blanked: String = out[at..end]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        out.replace_range(at..end, &blanked);
        from = end;
    }
    out
}

/// `(line number, call)` of each by-path call in `text` without its `path-ok:` reason.
fn by_path_calls(text: &str) -> Vec<(usize, &'static str)> {
    let source: Vec<&str> = text.lines().collect();
    let code = without_tests(&code_only(text));
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let excused = |k: usize| {
            source.get(k).is_some_and(|l| {
                l.split_once(MARKER)
                    .is_some_and(|(_, why)| why.trim().len() >= 10)
            })
        };
        if excused(n) || (n > 0 && excused(n - 1)) {
            continue;
        }
        for call in BY_PATH {
            if line.contains(call) {
                found.push((n + 1, *call));
            }
        }
    }
    found
}

#[test]
fn privileged_modules_take_no_path_after_a_check() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut problems = Vec::new();
    for file in PRIVILEGED {
        let text = std::fs::read_to_string(root.join(file))
            .unwrap_or_else(|e| panic!("{file}: {e} (a privileged module moved: update the list)"));
        for (line, call) in by_path_calls(&text) {
            problems.push(format!(
                "{file}:{line}: `{call}` takes a path; use src/safe_fs (or say why on the line, after `{MARKER}`)"
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn the_check_sees_calls_in_code_and_ignores_comments_strings_tests_and_reasons() {
    let source = r##"
use std::fs;
fn bad(p: &Path) {
    let m = fs::symlink_metadata(p);
    if p.exists() { fs::remove_file(p).ok(); }
    let c = b'"'; let s = fs::read_to_string(p);
    let ok = fs::read("/proc/self/stat"); // path-ok: the kernel's own file, not a user's
    // path-ok: root named this folder itself on its command line
    let also_ok = std::fs::read_dir(p);
}
// fs::remove_file(p) in a comment
const DOC: &str = "fs::write(p, x)";
const RAW: &str = r#"File::open(p)"#;
fn lifetime<'a>(x: &'a str) -> &'a str { x }
fn lazy(p: &Path) {
    // path-ok: short
    let no = fs::write(p, "x");
}
#[cfg(test)]
mod tests {
    fn t() { std::fs::write("/tmp/x", "y").unwrap(); }
}
"##;
    let found = by_path_calls(source);
    assert_eq!(
        found,
        vec![
            (4, "fs::symlink_metadata("),
            (5, "fs::remove_file("),
            (5, ".exists()"),
            (6, "fs::read_to_string("),
            (17, "fs::write("),
        ],
        "a reason shorter than a few words excuses nothing"
    );
}
