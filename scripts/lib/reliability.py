# SPDX-License-Identifier: BSD-2-Clause
"""docs/reliability.md, written in two sections by two runs: `make chaos`
(scripts/chaos/report.py) and `make soak` (scripts/soak/report.py). Each
run replaces its own section, heading and text included, and keeps the
other's as it was, so the file does not depend on which ran last. What
comes before the first section is written by hand, and kept."""

import os
import re

from tables import md_table, text_table

# (for a file that has none yet)
HEAD = """\
# Reliability

The sections below the first marker are written by `make chaos` and
`make soak`; do not edit them by hand.
"""

SECTIONS = ["chaos", "soak"]
PLACEHOLDERS = {
    "chaos": "## Chaos\n\nNot run yet: `make chaos` writes this section.\n",
    "soak": "## Soak\n\nNot run yet: `make soak` writes this section.\n",
}
BEGIN = "<!-- %s section: written by scripts/%s/report.py -->"
END = "<!-- end of %s section -->"


def read_file(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def read_head(text):
    """What comes before the first section: the hand-written part."""
    at = text.find(BEGIN % (SECTIONS[0], SECTIONS[0]))
    return text[:at].rstrip("\n") + "\n" if at > 0 else HEAD


def read_sections(text):
    """The sections a file's text holds, by name."""
    found = {}
    for name in SECTIONS:
        m = re.search(re.escape(BEGIN % (name, name)) + r"\n(.*?)" +
                      re.escape(END % name), text, re.S)
        if m:
            found[name] = m.group(1)
    return found


def write_section(path, name, text):
    """Rewrites path with `text` (Markdown from its "## " heading on) as
    section `name`, keeping the other section."""
    existing = read_file(path)
    sections = read_sections(existing)
    sections[name] = text if text.endswith("\n") else text + "\n"
    out = [read_head(existing)]
    for s in SECTIONS:
        out.append("\n%s\n%s%s\n" % (BEGIN % (s, s),
                                     sections.get(s, PLACEHOLDERS[s]), END % s))
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("".join(out))
    os.replace(tmp, path)


def report(run, table, caption, notes, failures, markdown):
    """Prints a run's table (header, rows, align), its caption, notes,
    failed checks and verdict (run: "chaos", "soak"), and writes them as
    Markdown to the file `markdown`. Returns the table and the list of
    notes and failures, as Markdown, for the docs."""
    print(text_table(*table))
    print(caption)
    for n in notes:
        print("note: " + n)
    for f in failures:
        print("FAILED: " + f)
    print("%s: %s" % (run, "%d checks failed" % len(failures) if failures
                      else "every check passed"))
    md = md_table(*table)
    lists = "\n".join(["- note: " + n for n in notes] +
                      (["- FAILED: " + f for f in failures] or
                       ["- every check passed"])) + "\n"
    with open(markdown, "w") as f:
        f.write(md + "\n\n" + caption + "\n\n" + lists)
    return md, lists
