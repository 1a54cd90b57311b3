"""docs/reliability.md, written in two sections by two runs: `make chaos`
(scripts/chaos/report.py) and `make soak` (scripts/soak/report.py). Each
run replaces its own section, heading and text included, and keeps the
other's as it was, so the file does not depend on which ran last."""

import os
import re

from tables import md_table, text_table

HEAD = """\
# Reliability

Written by `make chaos` (`scripts/chaos.sh`) and `make soak`
(`scripts/soak.sh`); do not edit by hand. Each section says which run
produced it. The chaos run breaks Redis and nginx under load and checks
that the module still answers as its configuration says; the soak run
keeps a small zone evicting for ten minutes and checks that memory stays
flat. Both run on loopback, on the machine that builds the module.
"""

SECTIONS = ["chaos", "soak"]
PLACEHOLDERS = {
    "chaos": "## Chaos\n\nNot run yet: `make chaos` writes this section.\n",
    "soak": "## Soak\n\nNot run yet: `make soak` writes this section.\n",
}
BEGIN = "<!-- %s section: written by scripts/%s/report.py -->"
END = "<!-- end of %s section -->"


def read_sections(path):
    """The sections an existing file holds, by name."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return {}
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
    sections = read_sections(path)
    sections[name] = text if text.endswith("\n") else text + "\n"
    out = [HEAD]
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
