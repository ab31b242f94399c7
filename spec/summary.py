"""The per-framework summary table, from reports/<adapter>.json written by each tox environment.

    python -m spec.summary    # exit 1 unless every registered adapter ran completely and passed

An adapter with no report did not run (or could not import its framework): it shows as
MISSING, never as passing.
"""

import json
import sys
from pathlib import Path

from adapters import NAMES

REPORTS = Path(__file__).resolve().parent.parent / "reports"


def row(name):
    path = REPORTS / f"{name}.json"
    if not path.exists():
        return [name, "-", "-", "-", "-", "-", "-", "-", "MISSING: no report (environment not run, or framework did not import)"], False
    report = json.loads(path.read_text())
    tests = report["tests"].values()
    passed = sum(t["outcome"] == "passed" for t in tests)
    failed = len(report["tests"]) - passed
    margins = [t["margin"] for t in tests if t["margin"] is not None]
    ulps = [t["ulp"] for t in tests if t.get("ulp") is not None]
    worst = f"{max(margins):.3f}" if margins else "-"
    worst_ulp = f"{max(ulps):.2f}" if ulps else "-"
    if failed:
        status = f"FAILED: {failed} test(s)"
    elif not report["complete"] or passed < report["expected"]:
        status = f"INCOMPLETE: {passed} of {report['expected']} ran"
    else:
        status = "conforms"
    cells = [name, report["version"], ", ".join(report["dtypes"]), str(report["expected"]), str(passed), str(failed), worst, worst_ulp, status]
    return cells, status == "conforms"


def main():
    header = ["framework", "version", "dtypes", "cases", "passed", "failed", "worst margin", "worst ULP", "status"]
    rows, ok = [], True
    for name in NAMES:
        cells, good = row(name)
        rows.append(cells)
        ok &= good
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for cells in rows:
        print(line(cells))
    print("\nworst margin: largest |error| / tolerance over computed expectations (1.0 would use the whole budget);"
          "\nworst ULP: largest distance from the float64 expectation, in units of the last place of the dtype")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
