#!/usr/bin/env python3
"""Fails on a broken internal link in the built book (mdbook build docs -> target/book).

Every href and src of every HTML page that is not an external URL must name a file of the
book, and its #fragment an id in that file; a link to a chapter's Markdown source (which
mdBook rewrites to .html only for files of the book) that was left as .md is broken too.

    python3 scripts/check_book_links.py [BOOK]    # target/book by default
    python3 scripts/check_book_links.py --self-test   # a broken book must fail
"""

import html.parser
import pathlib
import sys
import tempfile
import urllib.parse

EXTERNAL = ("http:", "https:", "mailto:", "javascript:", "data:")


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids = set()
        self.links = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)
            if name in ("href", "src") and value is not None:
                self.links.append(value)


def parse(path):
    page = Page()
    page.feed(path.read_text(errors="replace"))
    return page


def broken_links(book):
    book = pathlib.Path(book).resolve()
    pages = {p: parse(p) for p in book.rglob("*.html")}
    if not pages:
        return ["%s: no HTML pages (run mdbook build docs first)" % book]
    broken = []
    for path, page in sorted(pages.items()):
        # mdBook's print page repeats every chapter, links and all; 404.html is a template.
        if path.name in ("print.html", "404.html"):
            continue
        for link in page.links:
            if link.startswith(EXTERNAL) or link.startswith("//"):
                continue
            parts = urllib.parse.urlsplit(link)
            if parts.scheme:
                continue
            target = path if not parts.path else (path.parent / urllib.parse.unquote(parts.path)).resolve()
            where = "%s: %s" % (path.relative_to(book), link)
            if target.is_dir():
                target = target / "index.html"
            if not str(target).startswith(str(book)):
                broken.append(where + " (outside the book)")
                continue
            if not target.exists():
                broken.append(where + " (no such file)")
                continue
            if target.suffix == ".md":
                broken.append(where + " (a Markdown file: not a chapter of the book)")
                continue
            if parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else parse(target).ids
                if urllib.parse.unquote(parts.fragment) not in ids:
                    broken.append(where + " (no such anchor)")
    return broken


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "a.html").write_text('<h1 id="top">A</h1><a href="b.html#here">b</a>'
                                     '<a href="#top">top</a><a href="https://x.org">x</a>')
        (root / "b.html").write_text('<h2 id="here">B</h2><a href="a.html">a</a>')
        if broken_links(root):
            return ["self-test: a sound book was called broken: %s" % broken_links(root)]
        (root / "c.html").write_text('<a href="b.html#gone">1</a><a href="d.html">2</a>'
                                     '<a href="x.md">3</a><a href="../../etc/passwd">4</a>')
        (root / "x.md").write_text("")
        found = broken_links(root)
        if len(found) != 4:
            return ["self-test: 4 broken links expected, found %s" % found]
    return []


def main():
    args = sys.argv[1:]
    if args[:1] == ["--self-test"]:
        errors = self_test()
        args = args[1:]
        if errors:
            print("\n".join(errors), file=sys.stderr)
            sys.exit(1)
    book = args[0] if args else "target/book"
    broken = broken_links(book)
    for b in broken:
        print("broken link: " + b, file=sys.stderr)
    if broken:
        sys.exit(1)
    pages = len(list(pathlib.Path(book).rglob("*.html")))
    print("%s: %d pages, every internal link resolves" % (book, pages))


if __name__ == "__main__":
    main()
