#!/usr/bin/env python3
"""Writes docs/environment.md from src/base/env_vars.def, the one table of
the environment variables gang reads.

    python3 docs/gen_environment.py            # rewrites the page
    python3 docs/gen_environment.py --check    # exits 1 if the page is stale,
                                               # or a getenv() in src/ reads a
                                               # variable the table lacks
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
TABLE = ROOT / "src" / "base" / "env_vars.def"
PAGE = ROOT / "docs" / "environment.md"

SECTIONS = [
    ("rendezvous", "Rank and rendezvous",
     "Read by `gang_create` when the options leave a value unset."),
    ("launchers", "Launchers",
     "Where rank, size and the store come from when gang's own variables are unset: "
     "torchrun's first, then Open MPI's, PMI's and SLURM's (`gang_env_detect` says which won)."),
    ("timeouts", "Timeouts and failure detection", ""),
    ("debug", "Debugging, logs and tools", ""),
    ("backends", "Backends", ""),
    ("stores", "Stores", "Read by the stores gang serves and connects to."),
    ("system", "The system's", ""),
]

ROW = re.compile(r'^GANG_ENV_VAR\(\s*(\w+),\s*(\w+),((?:\s*"(?:[^"\\]|\\.)*")+)\s*\)', re.M)


def rows():
    text = TABLE.read_text()
    out = []
    for name, section, strings in ROW.findall(text):
        meaning = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', strings))
        out.append((name, section, meaning.replace('\\"', '"')))
    return out


def page():
    table = rows()
    known = {s for s, _, _ in SECTIONS}
    for name, section, _ in table:
        if section not in known:
            sys.exit(f"{TABLE}: {name} is in an unknown section {section!r}")
    lines = [
        "<!-- Generated from src/base/env_vars.def by docs/gen_environment.py; edit the",
        "     table, then run: python3 docs/gen_environment.py -->",
        "# Environment variables",
        "",
        "Every variable gang reads, from the one table the library reads them",
        "through (`src/base/env_vars.def`). Values are read when they are needed",
        "(at `gang_create`, mostly), so a program may change them between calls.",
        "",
    ]
    for key, title, intro in SECTIONS:
        lines += [f"## {title}", ""]
        if intro:
            lines += [intro, ""]
        lines += ["| variable | meaning |", "|---|---|"]
        lines += [f"| `{n}` | {m.replace('|', '&#124;')} |" for n, s, m in table if s == key]
        lines.append("")
    return "\n".join(lines)


def unlisted_reads():
    """getenv("NAME") calls in src/ (the launcher's own and the modules',
    which do not link base::env) that the table lacks."""
    listed = {n for n, _, _ in rows()}
    missing = []
    for path in sorted((ROOT / "src").rglob("*.cc")):
        for name in re.findall(r'(?:getenv|base::env|\benv)\("([A-Z][A-Z0-9_]*)"\)', path.read_text()):
            if name not in listed and name.startswith("GANG_"):
                missing.append(f"{path.relative_to(ROOT)}: {name}")
    return missing


def main():
    text = page()
    if "--check" in sys.argv[1:]:
        bad = False
        if not PAGE.exists() or PAGE.read_text() != text:
            print(f"{PAGE.relative_to(ROOT)} differs from {TABLE.relative_to(ROOT)}: "
                  "run python3 docs/gen_environment.py")
            bad = True
        for line in unlisted_reads():
            print(f"read but not in the table: {line}")
            bad = True
        sys.exit(1 if bad else 0)
    PAGE.write_text(text)


if __name__ == "__main__":
    main()
