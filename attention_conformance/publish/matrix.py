"""The conformance matrix: the spec's cases (grouped by family) against framework x dtype.

Built from the run reports each tox environment writes in its own process. An adapter without
a report is a MISSING column, never a passing one. Written as matrix.md, matrix.json (the same
content) and matrix.png (a heatmap) in the reports folder; the terminal gets it folded to a row per family
and a column per framework (compact), as wide as a terminal.
"""

import json
import textwrap
from pathlib import Path

from attention_conformance import writing
from attention_conformance.contract import ids

RANK = {
    "failed": 4,
    "error": 4,
    "stale divergence": 4,
    "known bug": 3,
    "diverged": 3,
    "other convention": 3,
    "raised as declared": 2.5,
    "on its side": 2.25,
    "passed": 2,
    "not applicable": 1,
}


def standing(result, convention=False):
    """How a test's result reads, by what its declared divergence is (cases/divergences.py: KINDS): a convention or a
    bug excused (any result), a raise checked, or a pass; `precision` in the result's own "declared" says at which
    accuracy a pass was judged. A report without "declared" (an older one): a divergence on a case that states a
    convention is another convention."""
    outcome, declared = result["outcome"], result.get("declared") or {}
    kind = declared.get("kind")
    if outcome == "diverged":
        return {"bug": "known bug", "convention": "other convention"}.get(kind) or (
            "other convention" if convention else "diverged"
        )
    if outcome == "passed" and kind == "raises":
        return "raised as declared"
    if outcome == "passed" and kind == "convention":
        return "on its side"
    return outcome


def precision_mark(result):
    """'@float32 accuracy' where a pass needed its declared precision, else ''."""
    declared = result.get("declared") or {}
    if declared.get("kind") != "precision" or not declared.get("needed"):
        return ""
    return f"@{declared['judged_at']}" + ("" if declared.get("bounded", True) else " (no bound)")


def build(found, outline, names):
    """{"columns": [...], "rows": [{"family", "case", "cells": {column: cell}}]} from {column prefix: report}
    (reports.merge: every report made from one spec); an adapter in `names` with no report is a MISSING
    column. The rows are the cases of `outline` (reports.outline: the spec the reports were made from), in order."""
    columns, cells = [], {}
    conventions = {case_id for case_id, _, convention in outline["cases"] if convention}
    for key in sorted(found):
        report = found[key]
        columns += [
            {"column": f"{key} {d}", "adapter": report["adapter"], "dtype": d, "missing": False}
            for d in report["dtypes"]
        ]
        for test_id, result in report["tests"].items():
            parsed = ids.parse(test_id)
            if not parsed:
                continue
            _, _, dtype, case_id = parsed
            cell = cells.setdefault(
                (case_id, f"{key} {dtype}"),
                {"status": "not applicable", "margin": None, "ulp": None, "tests": 0},
            )
            cell["tests"] += 1
            status = standing(result, case_id in conventions)
            if RANK[status] > RANK[cell["status"]] or cell["tests"] == 1:
                cell["status"] = "failed" if status == "error" else status
            if precision_mark(result) and not cell.get("declared"):
                cell["declared"] = precision_mark(result)
            for measure in ("margin", "ulp"):
                if result.get(measure) is not None:
                    cell[measure] = max(cell[measure] or 0.0, result[measure])
    reported = {r["adapter"] for r in found.values()}
    columns += [
        {"column": name, "adapter": name, "dtype": None, "missing": True} for name in names if name not in reported
    ]
    rows = []
    for fam in outline["families"]:
        for case_id, family, _ in outline["cases"]:
            if family != fam:
                continue
            row = {}
            for col in columns:
                if col["missing"]:
                    row[col["column"]] = {"status": "missing"}
                else:
                    row[col["column"]] = dict(cells.get((case_id, col["column"]), {"status": "not run in this dtype"}))
            rows.append({"family": fam, "case": case_id, "cells": row})
    return {"columns": [c["column"] for c in columns], "rows": rows}


# What a cell that did not pass means: matrix.md's legend and the page's cell details.
MEANING = {
    "known bug": "a declared upstream defect, excused whatever the numbers (spec/divergences/<adapter>.yaml or the "
    "adapter's KNOWN_DIVERGENCES, with its link)",
    "diverged": "known divergence of an older report, excused whatever the numbers",
    "other convention": "the other side of a split the spec names, declared without saying which (no `side`), "
    "excused whatever the numbers",
    "on its side": "the other side of a split the spec names (the fully masked row's NaN, a causal flag aligned top "
    "left, a layer's defaults), declared with its side and judged against the oracle computed on it",
    "raised as declared": "the call raised the exception its declaration names, as it should",
    "not applicable": "the adapter says why it cannot run it",
    "not run in this dtype": "the case has no check in this dtype",
    "failed": None,
    "stale divergence": "a declared divergence that now conforms (remove it)",
    "missing": "the framework's environment did not report",
}


# How a cell that did not pass reads, in matrix.md and on the page.
SHORT = {
    "failed": "FAIL",
    "stale divergence": "STALE",
    "known bug": "bug",
    "diverged": "div",
    "raised as declared": "raise",
    "other convention": "conv",
    "on its side": "side",
    "not applicable": "n/a",
    "missing": "MISSING",
    "not run in this dtype": "-",
}


LEGEND = (
    "ok M Uu: passed, worst |error| / tolerance M (0.03 = 3% of the budget), worst error U ULP at the tensor's scale; "
    "@D: judged at D, the precision its framework declares it computes at inside (float64 with a float32 softmax), "
    "M then of that allowance; "
    + "; ".join(SHORT[status] + (f": {meaning}" if meaning else "") for status, meaning in MEANING.items())
    + "."
)


def _cell_text(cell):
    status = cell["status"]
    if status == "passed":
        ulp = f" {cell['ulp']:.1f}u" if (cell.get("ulp") or 0) >= 0.05 else ""
        mark = f" {cell['declared']}" if cell.get("declared") else ""
        return (f"ok {cell['margin']:.2f}{ulp}" if cell.get("margin") is not None else "ok") + mark
    return SHORT[status]


def markdown(matrix):
    head = "| family | case | " + " | ".join(matrix["columns"]) + " |"
    lines = [head, "|" + "---|" * (len(matrix["columns"]) + 2)]
    previous = None
    for row in matrix["rows"]:
        fam = row["family"] if row["family"] != previous else ""
        previous = row["family"]
        lines.append(
            f"| {fam} | {row['case']} | " + " | ".join(_cell_text(row["cells"][c]) for c in matrix["columns"]) + " |"
        )
    return "\n".join(lines) + "\n\n" + LEGEND + "\n"


# A terminal is 120 columns: the per-case table (a row per case, a column per framework x dtype) is ~180 rows of
# 300 and more characters, so the terminal gets a row per family and a column per framework instead.
WIDTH = 120
# The longest framework name kept on one header line; a longer one (merged: "adapter version device@host") wraps.
HEADER = 20
# Which status a family's cell shows: the first that any of its cells has; counted in cases but for the two
# that say nothing case by case (an adapter that did not report, a framework with no check of the family).
UNCOUNTED = ("missing", "not run in this dtype")
WORST_FIRST = [
    "failed",
    "stale divergence",
    "missing",
    "known bug",
    "diverged",
    "other convention",
    "raised as declared",
    "on its side",
    "passed",
    "not applicable",
    "not run in this dtype",
]
COMPACT_LEGEND = (
    "A cell sums up a family's cases over every dtype of one framework: the first of "
    + ", ".join("ok M" if s == "passed" else SHORT[s] + " n" * (s not in UNCOUNTED) for s in WORST_FIRST)
    + " that any of them has (n: how many of the family's cases have it; M: the worst |error| / tolerance of its "
    "passed cells, 1 would use the whole budget, @ where some were judged at the precision their framework declares; "
    "bug: a known upstream defect; conv: another convention, excused; side: another convention, judged on its side; "
    "raise: raised as declared; n/a: not applicable; "
    "-: no check in any dtype)."
)


def _frameworks(matrix):
    """{framework: its columns}, in the matrix's order: a column less its dtype; a MISSING one is its name alone."""
    grouped = {}
    for column in matrix["columns"]:
        missing = matrix["rows"][0]["cells"][column]["status"] == "missing"
        grouped.setdefault(column if missing else column.rsplit(" ", 1)[0], []).append(column)
    return grouped


def _compact_cell(rows, columns):
    """The cell of `rows` (a family's) in `columns` (a framework's): its first status of WORST_FIRST, with how many
    of the rows have it; a passed one with its worst margin instead."""
    cells = [[row["cells"][c] for c in columns] for row in rows]
    status = next(s for s in WORST_FIRST if any(c["status"] == s for case in cells for c in case))
    if status == "passed":
        passed = [c for case in cells for c in case if c["status"] == "passed"]
        margins = [c["margin"] for c in passed if c.get("margin") is not None]
        mark = "@" if any(c.get("declared") for c in passed) else ""
        return (f"ok {max(margins):.2f}" if margins else "ok") + mark
    if status in UNCOUNTED:
        return SHORT[status]
    return f"{SHORT[status]} {sum(any(c['status'] == status for c in case) for case in cells)}"


def compact(matrix, width=WIDTH):
    """The matrix for a terminal: a row per family (and one for every case), a column per framework, its dtypes
    folded into the cell; blocks of columns, one under the other, where they would not fit in `width`."""
    if not matrix["rows"]:
        return ""
    families = {}
    for row in matrix["rows"]:
        families.setdefault(row["family"], []).append(row)
    labelled = [(f"{fam} ({len(rows)})", rows) for fam, rows in families.items()]
    labelled.append((f"every case ({len(matrix['rows'])})", matrix["rows"]))
    label = max(len(text) for text, _ in labelled + [("family (cases)", None)])
    columns = []  # (header lines, width, cells)
    for name, group in _frameworks(matrix).items():
        cells = [_compact_cell(rows, group) for _, rows in labelled]
        size = max(min(len(name), HEADER), *map(len, cells))
        columns.append((textwrap.wrap(name, size, break_on_hyphens=False), size, cells))
    blocks = [[]]
    for column in columns:
        if blocks[-1] and label + sum(2 + size for _, size, _ in blocks[-1] + [column]) > width:
            blocks.append([])
        blocks[-1].append(column)
    lines = []
    for block in blocks:
        depth = max(len(head) for head, _, _ in block)
        for i in range(depth):  # a wrapped name grows upwards: its last line sits over its cells
            first = "family (cases)" if i == depth - 1 else ""
            heads = [(([""] * depth + head)[-depth:][i], size) for head, size, _ in block]
            lines.append(first.ljust(label) + "".join(f"  {text.ljust(size)}" for text, size in heads))
        lines.append("-" * label + "".join("  " + "-" * size for _, size, _ in block))
        for r, (text, _) in enumerate(labelled):
            lines.append(text.ljust(label) + "".join(f"  {cells[r].ljust(size)}" for _, size, cells in block))
        lines.append("")
    return "\n".join([line.rstrip() for line in lines] + textwrap.wrap(COMPACT_LEGEND, width)) + "\n"


# RGB in 0..1, for matrix.png and the page alike: a passed cell runs from green (margin 0) to pale yellow-green
# (margin 1), never towards red, so a cell that used most of its budget still reads as a pass; red is a failure's
# alone, and every other status has a colour of its own (FAIL and STALE both fail the run, but need different fixes).
PASSED_COLOURS = ((0.16, 0.55, 0.27), (0.89, 0.95, 0.6))
COLOURS = {
    "failed": (0.82, 0.1, 0.1),
    "stale divergence": (0.96, 0.55, 0.1),
    "known bug": (0.45, 0.2, 0.55),
    "raised as declared": (0.75, 0.75, 0.55),
    "diverged": (0.55, 0.35, 0.75),
    "other convention": (0.55, 0.7, 0.95),
    "on its side": (0.45, 0.78, 0.75),
    "not applicable": (0.72, 0.72, 0.72),
    "missing": (0.3, 0.3, 0.32),
    "not run in this dtype": (0.94, 0.94, 0.94),
}


def heatmap(matrix, path):
    """A PNG of margins: green (0) to pale yellow-green (1) for a pass, red failure, each other status its colour."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cols, rows = matrix["columns"], matrix["rows"]
    rgb = np.ones((len(rows), len(cols), 3))
    low, high = np.array(PASSED_COLOURS[0]), np.array(PASSED_COLOURS[1])
    for i, row in enumerate(rows):
        for j, col in enumerate(cols):
            cell = row["cells"][col]
            if cell["status"] == "passed":
                t = min(max(cell.get("margin") or 0.0, 0.0), 1.0)
                rgb[i, j] = (1 - t) * low + t * high
            else:
                rgb[i, j] = COLOURS[cell["status"]]
    fig, ax = plt.subplots(figsize=(2.2 + 0.75 * len(cols), 1.5 + 0.2 * len(rows)))
    ax.imshow(rgb, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(cols)), cols, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(rows)), [f"{r['case']}  ({r['family']})" for r in rows], fontsize=6)
    # No number in each cell: ~3000 labels were half the main job's summary (2.4 s, measured) and
    # unreadable at this size; matrix.md and matrix.json hold the margins.
    ax.set_title(
        "Conformance margins of the passed cells: |error| / tolerance (green 0, pale yellow-green 1);\nred failure, "
        "orange stale divergence, purple known divergence (dark: a known bug), light blue other convention,\n"
        "teal on its side, khaki raised as declared, grey n/a, dark grey missing, light grey no check in this dtype",
        fontsize=8,
    )
    # Cropped to what was drawn rather than laid out first: tight_layout costs a second pass over the
    # ~3000 labels (1.2 s of the main job's summary, measured).
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def write(matrix, directory):
    """(the Markdown text, what was written: paths, or a note for a file that was not)."""
    directory = Path(directory)
    text = markdown(matrix)
    written = [directory / "matrix.md", directory / "matrix.json"]
    writing.whole(written[0], text.encode(), option="--out")
    writing.whole(written[1], (json.dumps(matrix, indent=1) + "\n").encode(), option="--out")
    try:
        heatmap(matrix, directory / "matrix.png")
        written.append(directory / "matrix.png")
    except ImportError:  # matplotlib is the `summary` extra; the table and the JSON need nothing
        written.append(
            "no matrix.png: install matplotlib for the heatmap (the [summary] extra of attention-conformance)"
        )
    return text, written
