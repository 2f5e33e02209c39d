//! Layers without cycles (issue 20): no module imports another that imports it back,
//! directly or round a loop, at the top level or between the files of a folder. The graph is
//! read from src/ by `scripts/import_graph.py` (run it to see the arrows; `--why A:B` names the
//! files behind one); this test runs its check, and proves on a made-up crate that the check
//! sees the cycles it must and ignores test code and comments.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::python3_available;

/// Cycles kept on purpose, by their members (`"a:b"`); none since h20pid's branch moved
/// `SourceEvent` to the model layer (which removed `state`<->`sources` and `pool`<->`runner`).
/// One listed that no longer occurs fails the check, so the list cannot go stale.
const KNOWN_CYCLES: &[&str] = &[];

fn graph(root: &Path, args: &[&str]) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/import_graph.py");
    Command::new("python3")
        .arg(script)
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .expect("run python3")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn no_module_imports_another_that_imports_it_back() {
    if !python3_available() {
        return;
    }
    let mut args = vec!["--check", "--cycles-only"];
    for known in KNOWN_CYCLES {
        args.extend(["--allow", known]);
    }
    let out = graph(Path::new(env!("CARGO_MANIFEST_DIR")), &args);
    assert!(
        out.status.success(),
        "import cycles (scripts/import_graph.py --why A:B names the files behind an arrow):\n{}",
        text(&out)
    );
}

#[test]
fn the_code_layout_chapter_names_every_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let layout = std::fs::read_to_string(root.join("docs/code-layout.md")).unwrap();
    assert!(layout.starts_with("# Layout of the code\n"));
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(root.join("src")).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        let named = if entry.file_type().unwrap().is_dir() {
            format!("`src/{name}/`")
        } else if name.ends_with(".rs") {
            format!("`src/{name}`")
        } else {
            continue;
        };
        if !layout.contains(&named) {
            missing.push(named);
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "docs/code-layout.md does not name {missing:?}"
    );
}

fn write(root: &Path, path: &str, content: &str) {
    let file = root.join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, content).unwrap();
}

#[test]
fn the_check_finds_cycles_at_the_top_and_inside_folders_and_only_those() {
    if !python3_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "src/lib.rs",
        "pub mod low;\npub mod high;\npub mod folder;\n",
    );
    // high -> low is downward; low reaching back up makes the top-level cycle.
    write(
        root,
        "src/high.rs",
        "use crate::low::Thing;\npub struct High;\n",
    );
    write(
        root,
        "src/low.rs",
        "pub struct Thing;\npub fn up() -> crate::high::High { crate::high::High }\n\
         // crate::folder::a is only named in a comment\n\
         const S: &str = \"crate::folder::b\";\n\
         #[cfg(test)]\nmod tests {\n    use crate::folder::a::A;\n}\n",
    );
    // Inside the folder: a -> b through a name mod.rs re-exports, b -> a through super.
    write(
        root,
        "src/folder/mod.rs",
        "mod a;\nmod b;\npub use b::B;\npub use a::A;\n",
    );
    write(root, "src/folder/a.rs", "use super::B;\npub struct A;\n");
    write(root, "src/folder/b.rs", "pub struct B(super::a::A);\n");

    let out = graph(root, &["--check", "--cycles-only"]);
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("src/ (top level): high -> low -> high"),
        "{said}"
    );
    assert!(said.contains("src/folder/: a -> b -> a"), "{said}");
    // The comment, the string and the test module name folder's files: no arrow from low.
    let arrows = text(&graph(root, &[]));
    assert!(arrows.contains("  low -> high\n"), "{arrows}");
    assert!(!arrows.contains("low -> folder"), "{arrows}");
    assert!(said.contains("2 cycles (2 not allowed)"), "{said}");

    // An allowed cycle passes; one that no longer occurs fails, so it gets removed.
    let allowed = graph(
        root,
        &[
            "--check", "--allow", "high:low", "--allow", "a:b", "--allow", "x:y",
        ],
    );
    let said = text(&allowed);
    assert!(!allowed.status.success(), "{said}");
    assert!(
        said.contains("the allowed cycle x:y no longer occurs"),
        "{said}"
    );
    assert!(
        !said.contains("import_graph: cycle in"),
        "allowed cycles are not reported: {said}"
    );
}
