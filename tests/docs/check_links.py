#!/usr/bin/env python3
"""The documentation's links hold: every relative link and #anchor in
README.md, docs/*.md, tests/README.md and bindings/**/README.md names a file
that exists and, in a markdown file, a heading that exists (GitHub's
slugs); and every page of docs/ can be reached from README.md.

    check_links.py [REPO_ROOT]     (default: two folders above this file)

Prints one line per problem and exits 1 if there is any. Python 3 standard
library only.
"""

import os
import re
import sys
from collections import deque
from urllib.parse import unquote

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # http:, https:, mailto:


def prose_lines(text):
    """(line number, line) outside fenced code blocks, inline code blanked."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        stripped = line.lstrip()
        m = re.match(r"(`{3,}|~{3,})", stripped)
        if m:
            if fence is None:
                fence = m.group(1)[0] * len(m.group(1))
            elif stripped.startswith(fence):
                fence = None
            continue
        if fence is None:
            yield n, re.sub(r"`+[^`]*`+", lambda c: " " * len(c.group(0)), line)


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = text.replace("`", "")
    text = re.sub(r"<[^>]+>", "", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found, seen = set(), {}
        with open(path, encoding="utf-8") as f:
            text = f.read()
        fence = None
        for line in text.split("\n"):
            stripped = line.lstrip()
            m = re.match(r"(`{3,}|~{3,})", stripped)
            if m:
                if fence is None:
                    fence = m.group(1)[0] * len(m.group(1))
                elif stripped.startswith(fence):
                    fence = None
                continue
            if fence is not None:
                continue
            h = HEADING.match(line)
            if h:
                base = slug(h.group(2))
                k = seen.get(base, 0)
                seen[base] = k + 1
                found.add(base if k == 0 else "%s-%d" % (base, k))
            for a in HTML_ANCHOR.findall(line):
                found.add(a)
        cache[path] = found
    return cache[path]


def pages(root):
    out = [os.path.join(root, "README.md"), os.path.join(root, "tests", "README.md")]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        out += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    bindings = os.path.join(root, "bindings")
    for dirpath, dirnames, filenames in os.walk(bindings):
        dirnames.sort()
        if "README.md" in filenames:
            out.append(os.path.join(dirpath, "README.md"))
    return [p for p in out if os.path.isfile(p)]


def check(root):
    root = os.path.abspath(root)
    problems = []
    edges = {}
    for page in pages(root):
        rel = os.path.relpath(page, root)
        edges[page] = set()
        with open(page, encoding="utf-8") as f:
            text = f.read()
        for n, line in prose_lines(text):
            for target in LINK.findall(line):
                if EXTERNAL.match(target):
                    continue
                path, _, anchor = target.partition("#")
                path = unquote(path)
                dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
                where = "%s:%d: %s" % (rel, n, target)
                if not dest.startswith(root + os.sep) and dest != root:
                    problems.append(where + ": leaves the repository")
                    continue
                if not os.path.exists(dest):
                    problems.append(where + ": no such file " + os.path.relpath(dest, root))
                    continue
                if dest.endswith(".md"):
                    edges[page].add(dest)
                if anchor:
                    if not dest.endswith(".md") or os.path.isdir(dest):
                        problems.append(where + ": an anchor into a file that is not markdown")
                    elif unquote(anchor) not in anchors(dest):
                        problems.append(where + ": no heading #%s in %s" % (anchor, os.path.relpath(dest, root)))
    # Every page of docs/ can be reached from README.md.
    start = os.path.join(root, "README.md")
    reached, todo = {start}, deque([start])
    while todo:
        page = todo.popleft()
        if page not in edges and os.path.isfile(page):
            edges[page] = set()
            with open(page, encoding="utf-8") as f:
                for _, line in prose_lines(f.read()):
                    for target in LINK.findall(line):
                        path = unquote(target.partition("#")[0])
                        if path and not EXTERNAL.match(target) and path.endswith(".md"):
                            edges[page].add(os.path.normpath(os.path.join(os.path.dirname(page), path)))
        for nxt in edges.get(page, ()):
            if nxt not in reached:
                reached.add(nxt)
                todo.append(nxt)
    for page in pages(root):
        rel = os.path.relpath(page, root)
        if rel.startswith("docs" + os.sep) and page not in reached:
            problems.append("%s: not reachable from README.md" % rel)
    return problems


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    problems = check(root)
    for p in problems:
        print(p)
    n = len(pages(os.path.abspath(root)))
    if problems:
        print("check_links: %d problem(s) in %d pages" % (len(problems), n))
        return 1
    print("check_links: %d pages, every link and anchor holds, every docs/ page reachable" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
