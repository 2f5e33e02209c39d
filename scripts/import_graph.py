#!/usr/bin/env python3
"""The crate's module import graph: arrows and cycles (issue 20, §3 and §5).

    python3 scripts/import_graph.py            # print the graph
    python3 scripts/import_graph.py --check    # also exit 1 on any cycle
    python3 scripts/import_graph.py --check --allow state:sources

Reads src/ (stdlib only; no compiler needed). Every path a file names is an arrow from that
file to the module the path lands in: `use crate::...`, `use super::...`, `self::`, bare
paths through a child module (`families::write`), inline paths (`crate::model::now_ms()`),
and `vramscope::...` in src/main.rs. A name a module re-exports (`pub use x::Y`) is followed
to the child that defines it, so `super::Y` is an arrow to the file Y lives in.

Test code does not count: items under `#[cfg(test)]` (test modules, test-only files) may
reach anywhere, as tests do. Comments and string literals are skipped, except the paths in
serde's `with = "..."` attributes, which name modules.

The graph is printed per level: the crate's top-level modules (`src/x.rs` or `src/x/`),
then inside every folder its files and subfolders (`mod.rs` is the folder's own file). An
arrow between two folders' files shows at the level where their paths part. Each level's
cycles are listed (every elementary cycle, each once); `--check` fails on any that is not
allowed. An allowed cycle is named by the set of its members (`a:b`, order free); one that no
longer occurs also fails the check, so a stale exception is removed rather than kept.
"""

import argparse
import os
import re
import sys
from collections import defaultdict

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_comments_and_strings(text):
    """Blanks comments, string and char literals (keeping newlines), so paths in prose or
    text are not read as imports."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
            continue
        if text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        m = re.match(r'b?r(#*)"', text[i:i + 260])
        if m and (i == 0 or not re.match(r"[A-Za-z0-9_]", text[i - 1])):
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if c == '"':
            # serde's `with = "path"` (and its kin) names a module: kept as a path.
            attr = re.search(r"\b(with|serialize_with|deserialize_with|default)\s*=\s*$", text[max(0, i - 40):i])
            path = re.match(r'"((?:(?:crate|self|super|' + IDENT + r')::)*' + IDENT + r')"', text[i:i + 200])
            if attr and path:
                out.append(" " + path.group(1) + " ")
                i += path.end()
                continue
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", text[i:j + 1]))
            i = j + 1
            continue
        if c == "'":
            # A char literal ('x', '\n', '\u{1F}'), not a lifetime ('a).
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|\\.|[^\\'])'", text[i:i + 12])
            if m:
                out.append(" " * m.end())
                i += m.end()
                continue
        out.append(c)
        i += 1
    return "".join(out)


def matching_brace(text, start):
    """Index just past the `}` closing the `{` at `start`."""
    depth = 0
    for j in range(start, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


CFG_TEST = re.compile(r"#\[cfg\((test|all\(test\b[^\]]*\))\)\]")


def strip_test_items(text):
    """Blanks every item under `#[cfg(test)]` (a module, a function, a use)."""
    while True:
        m = CFG_TEST.search(text)
        if not m:
            return text
        j = m.end()
        # Further attributes on the same item.
        while True:
            a = re.match(r"\s*#\[", text[j:])
            if not a:
                break
            j = matching_bracket(text, j + a.end() - 1)
        end = j
        while end < len(text) and text[end] not in ";{":
            end += 1
        end = matching_brace(text, end) if end < len(text) and text[end] == "{" else end + 1
        text = text[:m.start()] + re.sub(r"[^\n]", " ", text[m.start():end]) + text[end:]


def matching_bracket(text, start):
    depth = 0
    for j in range(start, len(text)):
        if text[j] == "[":
            depth += 1
        elif text[j] == "]":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def split_top(s, sep=","):
    parts, depth, cur = [], 0, []
    for c in s:
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def expand_use_tree(tree, prefix=()):
    """`a::{b, c::{d, self}}` -> [(a,b), (a,c,d), (a,c)]; `x as y` keeps x."""
    tree = re.sub(r"\s+as\s+" + IDENT, "", tree)
    tree = re.sub(r"\s+", "", tree)
    if not tree:
        return []
    if tree.startswith("::"):
        tree = tree[2:]
    if tree.startswith("{") and tree.endswith("}"):
        out = []
        for part in split_top(tree[1:-1]):
            out.extend(expand_use_tree(part, prefix))
        return out
    brace = tree.find("{")
    if brace >= 0:
        head = tree[:brace].rstrip(":")
        segs = tuple(s for s in head.split("::") if s)
        return expand_use_tree(tree[brace:], prefix + segs)
    segs = tuple(s for s in tree.split("::") if s)
    segs = tuple(s for s in segs if s not in ("*",))
    if segs and segs[-1] == "self":
        segs = segs[:-1]
    return [prefix + segs]


class Crate:
    def __init__(self, root):
        self.root = root
        self.src = os.path.join(root, "src")
        self.files = {}  # module path tuple -> file path (relative to src)
        self.test_only = set()  # files declared under #[cfg(test)]
        self.text = {}  # module -> cleaned text
        self.children = defaultdict(set)  # module -> child module names (files and inline)
        self.reexports = defaultdict(dict)  # module -> {name: full module path it comes from}
        self._load()

    def _module_of(self, rel):
        parts = rel[:-3].split(os.sep)
        if parts == ["lib"]:
            return ()
        if parts == ["main"]:
            return ("<main>",)
        if parts[-1] == "mod":
            parts = parts[:-1]
        return tuple(parts)

    def _load(self):
        raw = {}
        for dirpath, _, names in os.walk(self.src):
            for name in sorted(names):
                if not name.endswith(".rs"):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, self.src)
                with open(full, encoding="utf-8") as f:
                    raw[rel] = f.read()
        # Test-only files: declared under #[cfg(test)], with or without #[path].
        decl = re.compile(
            r"#\[cfg\(test\)\]\s*(?:#\[path\s*=\s*\"([^\"]+)\"\]\s*)?(?:pub(?:\([a-z]+\))?\s+)?mod\s+("
            + IDENT + r")\s*;")
        for rel, text in raw.items():
            folder = os.path.dirname(rel)
            base = os.path.basename(rel)
            own = folder if base in ("mod.rs", "lib.rs", "main.rs") else os.path.join(folder, base[:-3])
            for m in decl.finditer(text):
                if m.group(1):
                    self.test_only.add(os.path.normpath(os.path.join(folder, m.group(1))))
                else:
                    for cand in (os.path.join(own, m.group(2) + ".rs"),
                                 os.path.join(own, m.group(2), "mod.rs")):
                        self.test_only.add(os.path.normpath(cand))
        for rel, text in raw.items():
            if rel in self.test_only:
                continue
            module = self._module_of(rel)
            self.files[module] = rel
            cleaned = strip_test_items(strip_comments_and_strings(text))
            self.text[module] = cleaned
        for module in self.files:
            if module and module != ("<main>",):
                self.children[module[:-1]].add(module[-1])

    def is_file_module(self, path):
        return tuple(path) in self.files

    def file_module_of(self, path):
        """The longest prefix of `path` that is a file's module, following re-exports."""
        path = tuple(path)
        best = ()
        for k in range(len(path), -1, -1):
            if path[:k] in self.files:
                best = path[:k]
                break
        # A name the module re-exports from one of its descendants.
        if len(path) > len(best):
            target = self.reexports.get(best, {}).get(path[len(best)])
            if target is not None and target != best and target[:len(best)] == best:
                return self.file_module_of(target + path[len(best) + 1:])
        return best

    def resolve(self, module, inline, segs):
        """Absolute path for `segs` written in `module` (inside inline modules `inline`), or
        None for a path outside the crate (std, a dependency, a local name)."""
        here = module + inline
        if not segs:
            return None
        if module == ("<main>",):
            if segs[0] == "vramscope":
                return tuple(segs[1:])
            return None
        first = segs[0]
        if first == "crate":
            base, rest = (), segs[1:]
        elif first in ("self", "super"):
            base, rest = here, list(segs)
            while rest and rest[0] in ("self", "super"):
                if rest[0] == "super":
                    base = base[:-1]
                rest = rest[1:]
        elif first in self.children.get(here, ()) or (not inline and first in self.children.get(module, ())):
            base, rest = here, segs
        else:
            return None
        return tuple(base) + tuple(rest)

    def references(self, module):
        """Every absolute path named in `module`'s file (outside test code)."""
        text = self.text[module]
        # Inline modules: where each begins and ends, to resolve `super` inside them.
        spans = []
        # `mod $name {` is a module a macro makes.
        for m in re.finditer(r"\bmod\s+\$?(" + IDENT + r")\s*\{", text):
            spans.append((m.end() - 1, matching_brace(text, m.end() - 1), m.group(1)))
            self.children[module].add(m.group(1))

        def inline_at(pos):
            return tuple(name for (s, e, name) in spans if s <= pos < e)

        found = []
        uses = list(re.finditer(r"\buse\s+([^;]+);", text))
        covered = []
        for m in uses:
            covered.append((m.start(), m.end()))
            public = bool(re.search(r"\bpub(\([^)]*\))?\s*$", text[max(0, m.start() - 16):m.start()]))
            inline = inline_at(m.start())
            for segs in expand_use_tree(m.group(1)):
                target = self.resolve(module, inline, list(segs))
                if target is not None:
                    found.append(target)
                    if public and not inline:
                        self.reexports[module][segs[-1]] = target[:-1] if target[:-1] else target
        head = r"(?<![A-Za-z0-9_:])((?:crate|self|super|vramscope|" + IDENT + r")(?:\s*::\s*" + IDENT + r")+)"
        for m in re.finditer(head, text):
            if any(s <= m.start() < e for s, e in covered):
                continue
            segs = [s.strip() for s in m.group(1).split("::")]
            target = self.resolve(module, inline_at(m.start()), segs)
            if target is not None:
                found.append(target)
        return found

    def arrows(self):
        """(from file module, to file module, via path) for every reference."""
        refs = {module: self.references(module) for module in sorted(self.files)}
        out = set()
        for module, paths in refs.items():
            for path in paths:
                target = self.file_module_of(path)
                if target != module:
                    out.add((module, target))
        return out


def level_arrows(file_arrows):
    """Per folder (a module path), the arrows between its items. An item is a child's name,
    or `mod.rs` for the folder's own file (`lib.rs` at the top)."""
    levels = defaultdict(set)
    for src, dst in file_arrows:
        if src == ("<main>",):
            levels[()].add(("main.rs", dst[0] if dst else "lib.rs"))
            continue
        k = 0
        while k < min(len(src), len(dst)) and src[k] == dst[k]:
            k += 1
        own = "lib.rs" if k == 0 else "mod.rs"
        a = src[k] if len(src) > k else own
        b = dst[k] if len(dst) > k else own
        levels[src[:k]].add((a, b))
    return levels


def elementary_cycles(nodes, edges):
    """Every elementary cycle once (Johnson's algorithm, small graphs), each as a list
    starting at its least node."""
    adj = defaultdict(set)
    for a, b in edges:
        adj[a].add(b)
    order = sorted(nodes)
    cycles = []
    for i, start in enumerate(order):
        allowed = set(order[i:])
        stack = [(start, iter(sorted(adj[start] & allowed)))]
        path, on = [start], {start}
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                on.discard(path.pop())
                continue
            if nxt == start:
                cycles.append(list(path))
            elif nxt not in on:
                path.append(nxt)
                on.add(nxt)
                stack.append((nxt, iter(sorted(adj[nxt] & allowed))))
            if len(cycles) > 10000:
                return cycles
    return cycles


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    parser.add_argument("--check", action="store_true", help="exit 1 on any cycle not allowed")
    parser.add_argument("--allow", action="append", default=[],
                        help="a known cycle, by its members: a:b (repeatable)")
    parser.add_argument("--why", metavar="A:B",
                        help="print the file arrows behind the arrow A -> B (at any level)")
    parser.add_argument("--cycles-only", action="store_true", help="print only the cycles")
    args = parser.parse_args()

    crate = Crate(os.path.abspath(args.root))
    file_arrows = crate.arrows()
    if args.why:
        a, b = args.why.split(":")
        for src, dst in sorted(file_arrows):
            for level, edges in level_arrows({(src, dst)}).items():
                if (a, b) in edges:
                    print(f"{crate.files[src]} -> {crate.files[dst]}")
        return 0
    levels = level_arrows(file_arrows)
    allowed = {frozenset(a.split(":")) for a in args.allow}
    seen_allowed = set()
    failing = []
    total = 0
    for level in sorted(levels):
        name = "src/ (top level)" if not level else "src/" + "/".join(level) + "/"
        edges = levels[level]
        nodes = {a for a, _ in edges} | {b for _, b in edges}
        cycles = elementary_cycles(nodes, edges)
        total += len(cycles)
        if not args.cycles_only:
            print(f"== {name}: {len(edges)} arrows, {len(cycles)} cycles")
            by_src = defaultdict(list)
            for a, b in sorted(edges):
                by_src[a].append(b)
            for a in sorted(by_src):
                print(f"  {a} -> {', '.join(by_src[a])}")
        for cycle in cycles:
            members = frozenset(cycle)
            mark = ""
            if members in allowed:
                seen_allowed.add(members)
                mark = "  (allowed)"
            else:
                failing.append((name, cycle))
            line = " -> ".join(cycle + [cycle[0]])
            if args.cycles_only:
                print(f"{name}: {line}{mark}")
            else:
                print(f"  cycle: {line}{mark}")
    print(f"== total: {total} cycles ({len(failing)} not allowed)")
    if args.check:
        stale = allowed - seen_allowed
        for members in sorted(stale, key=sorted):
            print(f"import_graph: the allowed cycle {':'.join(sorted(members))} no longer "
                  f"occurs; remove it from the allowed list", file=sys.stderr)
        for name, cycle in failing:
            print(f"import_graph: cycle in {name}: {' -> '.join(cycle + [cycle[0]])}", file=sys.stderr)
        if failing or stale:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
