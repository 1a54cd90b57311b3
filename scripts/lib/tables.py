# SPDX-License-Identifier: BSD-2-Clause
"""Tables for the reports of the bench, accuracy, chaos and soak runs
(scripts/*/report.py): the same rows as Markdown (for docs/) and as
aligned text (for the terminal). align holds "l" or "r" per column."""


def md_table(header, rows, align):
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join(":---" if a == "l" else "---:" for a in align) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def text_table(header, rows, align):
    cells = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for n, r in enumerate(cells):
        lines.append("  ".join(c.ljust(w) if a == "l" else c.rjust(w)
                               for c, w, a in zip(r, widths, align)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
