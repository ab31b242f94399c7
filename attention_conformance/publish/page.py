"""The conformance page: one self-contained HTML file (reports/index.html) of what the summary read.

The summary table and its verdict, the kill rate, the matrix (cases by family against framework x
dtype, and device@host when merged from several machines) coloured by margin as matrix.png is, and
every cell's tests: outcome, margin, ULP, the worst element against its expected value, the
tolerance and where the expected value came from, the failure's message, the reason for a
not-applicable test or a known divergence with its link. The benchmark's tables when a folder has
reports/benchmark.json.

One file, nothing fetched: the style, the script and the data are inline (page.html is the
template; the data is JSON in a <script type="application/json">). The script writes text with
textContent only, so nothing an adapter returned is ever read as HTML, and makes links of http(s)
addresses alone.
"""

import json
import math
from importlib.resources import files
from pathlib import Path

from attention_conformance import writing
from attention_conformance.contract import ids
from attention_conformance.publish import matrix, speed
from attention_conformance.run import reports

PLACEHOLDER = "/*DATA*/null"
# Outcomes in a cell's test list, by code, so the page holds a digit per test rather than a word.
OUTCOMES = [
    "passed",
    "failed",
    "error",
    "diverged",
    "not applicable",
    "stale divergence",
    "known bug",
    "other convention",
    "raised as declared",
    "on its side",
]


class _Strings:
    """Each distinct text once: the same reason or origin repeats over dtypes and outputs (7 in 10 of a
    full run's texts are repeats), so tests refer to it by index."""

    def __init__(self):
        self.items, self.index = [], {}

    def __call__(self, text):
        if text is None:
            return -1
        if text not in self.index:
            self.index[text] = len(self.items)
            self.items.append(text)
        return self.index[text]


def _short(value):
    """A margin, ULP or error as the page shows it: 4 significant digits hold every figure it prints.
    None for a value JSON cannot hold (an infinite ULP at an expected 0): the page shows '-'."""
    shown = float(f"{value:.4g}") if value is not None and math.isfinite(value) else None
    return shown if shown is None or math.isfinite(shown) else None  # the largest float rounds up to inf


def _finite(value):
    return value if math.isfinite(value) else str(value)


def _test(function, result, text, convention=False):
    """[output, outcome code (its standing: matrix.standing), margin, ULP, message, reason, worst] with texts as
    indexes into the string table; a pass judged at a declared precision says so in its reason."""
    worst = result.get("worst") or {}
    if "element" not in worst:  # none, or a failure that raised: its op alone (run/root_cause.py), its message says it
        worst = None
    else:
        worst = [
            worst["element"],
            _finite(worst["got"]),
            _finite(worst["expected"]),
            _short(worst["error"]),
            _short(worst["allowed"]),
            text(worst["tolerance"]),
            text(worst["from"]),
        ]
    return [
        function,
        OUTCOMES.index(matrix.standing(result, convention)),
        _short(result.get("margin")),
        _short(result.get("ulp")),
        text(result.get("message")),
        text(_reason(result)),
        worst or 0,
    ]


def _reason(result):
    declared, reason = result.get("declared") or {}, result.get("reason")
    if declared.get("kind") == "precision" and declared.get("needed"):
        return f"judged at {declared['judged_at']}, as {declared['fact']!r} declares: {reason}"
    if declared.get("kind") == "raises":
        return f"raised as {declared['fact']!r} declares ({declared.get('raised')}): {reason}"
    return reason


def tables_of(markdown):
    """Blocks of Markdown text as the page shows them: [["p", line]] or [["table", header, rows]]."""
    blocks, rows = [], []
    for line in markdown.splitlines() + [""]:
        if line.startswith("|"):
            if not set(line) <= set("|-: "):  # the separator under a header
                rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
            continue
        if rows:
            blocks.append(["table", rows[0], rows[1:]])
            rows = []
        if line.strip():
            blocks.append(["p", line.strip()])
    return blocks


def _benchmarks(directories):
    """[{"folder", "blocks"}] for each folder holding benchmark.json; one that cannot be read says so."""
    found = []
    for directory in directories:
        path = Path(directory) / "benchmark.json"
        if not path.is_file():
            continue
        try:
            blocks = tables_of(speed.tables(json.loads(path.read_text())))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            blocks = [["p", f"{path} is not a report of `tox -e benchmark` ({type(exc).__name__}: {exc}): rerun it"]]
        found.append({"folder": str(directory), "blocks": blocks})
    return found


def data(*, summary, verdict, measured_on, kill, built, found, directories):
    """The page's content: `summary` (header, rows, whether each conforms, notes), `verdict` (conforms?, line),
    `kill` (line, header, rows with whether each wrong adapter behaved as expected; or None),
    `built` (matrix.build), `found` (column prefix -> report, as the matrix was built from)."""
    text = _Strings()
    where = {f"{key} {dtype}": (key, report) for key, report in found.items() for dtype in report["dtypes"]}
    columns = []
    for name in built["columns"]:
        key, report = where.get(name, (name, None))
        columns.append(
            {
                "name": name,
                "group": key,
                "adapter": report["adapter"] if report else name,
                "dtype": name[len(key) + 1 :] if report else None,
            }
        )
    tests = {}  # (case, column) -> the cell's tests
    outline = next(iter(found.values())).get("outline", {"cases": []}) if found else {"cases": []}  # one spec
    conventions = {case_id for case_id, _, convention in outline["cases"] if convention}
    for key, report in found.items():
        for test_id, result in report["tests"].items():
            parsed = ids.parse(test_id)
            if parsed:
                function, _, dtype, case_id = parsed
                tests.setdefault((case_id, f"{key} {dtype}"), []).append(
                    _test(function, result, text, case_id in conventions)
                )
    rows = []
    for row in built["rows"]:
        cells = []
        for column in built["columns"]:
            cell = row["cells"][column]
            cells.append(
                [
                    cell["status"],
                    _short(cell.get("margin")),
                    _short(cell.get("ulp")),
                    tests.get((row["case"], column), []),
                ]
            )
        rows.append([row["family"], row["case"], cells])
    return {
        "schema": reports.SCHEMA,
        "folders": [str(d) for d in directories],
        "finished": max((r["finished"] for r in found.values()), default=None),
        "spec_sha256": next((r.get("spec_sha256") for r in found.values()), None),
        "summary": summary,
        "verdict": verdict,
        "measured_on": measured_on,
        "kill": kill,
        "columns": columns,
        "rows": rows,
        "outcomes": OUTCOMES,
        "strings": text.items,
        "short": matrix.SHORT,
        "meaning": matrix.MEANING,
        "colours": {"passed": matrix.PASSED_COLOURS, **matrix.COLOURS},
        "benchmarks": _benchmarks(directories),
    }


def render(content):
    """The page: the template with the data in it. `<` is escaped inside the JSON, so no text in it
    (a message quoting `</script>`) can end the script element early."""
    template = files("attention_conformance.publish").joinpath("page.html").read_text(encoding="utf-8")
    payload = json.dumps(content, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    return template.replace(PLACEHOLDER, payload, 1)


def target(path):
    """Where `--html PATH` writes: PATH, or index.html inside it when PATH is a folder (or ends with a slash)."""
    path = str(path)
    return Path(path) / "index.html" if path.endswith(("/", "\\")) or Path(path).is_dir() else Path(path)


def write(content, path):
    """Write the page whole (a reader never sees half of it); return its path."""
    path = target(path)
    writing.whole(path, render(content).encode("utf-8"), option="--html")
    return path
