"""The conformance matrix: the spec's cases (grouped by family) against framework x dtype.

Built from the run reports each tox environment writes in its own process. An adapter without
a report is a MISSING column, never a passing one. Written as matrix.md, matrix.json (the same
content) and matrix.png (a heatmap) in the reports folder.
"""

import json
from pathlib import Path

from attention_conformance import writing
from attention_conformance.contract import ids

RANK = {"failed": 4, "error": 4, "stale divergence": 4, "diverged": 3, "passed": 2, "not applicable": 1}


def build(found, outline, names):
    """{"columns": [...], "rows": [{"family", "case", "cells": {column: cell}}]} from {column prefix: report}
    (reports.merge: every report made from one spec); an adapter in `names` with no report is a MISSING
    column. The rows are the cases of `outline` (reports.outline: the spec the reports were made from), in order."""
    columns, cells = [], {}
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
                (case_id, f"{key} {dtype}"), {"status": "not applicable", "margin": None, "ulp": None, "tests": 0}
            )
            cell["tests"] += 1
            if RANK[result["outcome"]] > RANK[cell["status"]] or cell["tests"] == 1:
                cell["status"] = "failed" if result["outcome"] == "error" else result["outcome"]
            for measure in ("margin", "ulp"):
                if result.get(measure) is not None:
                    cell[measure] = max(cell[measure] or 0.0, result[measure])
    reported = {r["adapter"] for r in found.values()}
    columns += [
        {"column": name, "adapter": name, "dtype": None, "missing": True} for name in names if name not in reported
    ]
    rows = []
    for fam in outline["families"]:
        for case_id, family, convention in outline["cases"]:
            if family != fam:
                continue
            row = {}
            for col in columns:  # a divergence where the case states a convention is another convention, not an error
                if col["missing"]:
                    row[col["column"]] = {"status": "missing"}
                else:
                    cell = dict(cells.get((case_id, col["column"]), {"status": "not run in this dtype"}))
                    if convention and cell["status"] == "diverged":
                        cell["status"] = "other convention"
                    row[col["column"]] = cell
            rows.append({"family": fam, "case": case_id, "cells": row})
    return {"columns": [c["column"] for c in columns], "rows": rows}


# What a cell that did not pass means: matrix.md's legend and the page's cell details.
MEANING = {
    "diverged": "known divergence (spec/divergences/<adapter>.yaml or the adapter's KNOWN_DIVERGENCES)",
    "other convention": "a declared difference on a case that states a convention where the math has no single "
    "answer (the fully masked row, a causal flag over fewer queries than keys)",
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
    "diverged": "div",
    "other convention": "conv",
    "not applicable": "n/a",
    "missing": "MISSING",
    "not run in this dtype": "-",
}


LEGEND = (
    "ok M Uu: passed, worst |error| / tolerance M (0.03 = 3% of the budget), worst error U ULP at the tensor's scale; "
    + "; ".join(SHORT[status] + (f": {meaning}" if meaning else "") for status, meaning in MEANING.items())
    + "."
)


def _cell_text(cell):
    status = cell["status"]
    if status == "passed":
        ulp = f" {cell['ulp']:.1f}u" if (cell.get("ulp") or 0) >= 0.05 else ""
        return f"ok {cell['margin']:.2f}{ulp}" if cell.get("margin") is not None else "ok"
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


# RGB in 0..1, for matrix.png and the page alike: a passed cell runs from green (margin 0) to red (margin 1).
PASSED_COLOURS = ((0.2, 0.7, 0.3), (0.85, 0.15, 0.1))
COLOURS = {
    "failed": (0, 0, 0),
    "stale divergence": (0, 0, 0),
    "diverged": (0.55, 0.35, 0.75),
    "other convention": (0.55, 0.7, 0.95),
    "not applicable": (0.75, 0.75, 0.75),
    "missing": (1, 1, 1),
    "not run in this dtype": (0.93, 0.93, 0.93),
}


def heatmap(matrix, path):
    """A PNG of margins: green (0) to red (1), grey n/a, purple divergence, black failure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cols, rows = matrix["columns"], matrix["rows"]
    rgb = np.ones((len(rows), len(cols), 3))
    green, red = np.array(PASSED_COLOURS[0]), np.array(PASSED_COLOURS[1])
    for i, row in enumerate(rows):
        for j, col in enumerate(cols):
            cell = row["cells"][col]
            if cell["status"] == "passed":
                t = min(max(cell.get("margin") or 0.0, 0.0), 1.0)
                rgb[i, j] = (1 - t) * green + t * red
            else:
                rgb[i, j] = COLOURS[cell["status"]]
    fig, ax = plt.subplots(figsize=(2.2 + 0.75 * len(cols), 1.5 + 0.2 * len(rows)))
    ax.imshow(rgb, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(cols)), cols, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(rows)), [f"{r['case']}  ({r['family']})" for r in rows], fontsize=6)
    # No number in each cell: ~3000 labels were half the main job's summary (2.4 s, measured) and
    # unreadable at this size; matrix.md and matrix.json hold the margins.
    ax.set_title(
        "Conformance margins: |error| / tolerance (green 0, red 1); purple known divergence, "
        "grey n/a, light grey no check in this dtype, black failure",
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
