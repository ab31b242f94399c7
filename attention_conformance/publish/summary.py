"""The per-framework summary table, the wrong-adapter kill rate, the matrix and the page, from the reports.

    attention-conformance summary [--reports DIR ...] [--adapter NAME ...] [--out DIR] [--html PATH]
        exit 1 unless every adapter the folders hold ran completely and conformed, every adapter
        named with --adapter reported, and every wrong adapter a run defined was run and caught

The table summarises what the folders hold: every column of each adapter asked for with --adapter (its other
modes' too, attention_conformance/modes.py), or every report without it. An adapter asked for that has no
report, or whose run the folder shows as unfinished (it died, or its framework did not import),
is MISSING, never passing. The last line printed is the verdict and, on failure, why.
"""

import collections
import sys
from pathlib import Path

from attention_conformance import machine, modes
from attention_conformance.cases import loader
from attention_conformance.contract import ids
from attention_conformance.publish import matrix, page
from attention_conformance.run import reports, root_cause


def _failing(results):
    return sorted(t for t, r in results.items() if r["outcome"] in ("failed", "error", "stale divergence"))


def row(name, report, convention_cases=(), missing=None):
    """(table cells, what is wrong for the verdict line or None); `missing` says why there is no finished report."""
    if report is None:
        status = f"MISSING: {missing or 'no report (environment not run, or framework did not import)'}"
        return [name, "-", "-", "-", "-", "-", "-", "-", "-", "-", status], status
    results = report["tests"]
    count = {
        outcome: sum(r["outcome"] == outcome for r in results.values())
        for outcome in ("passed", "diverged", "not applicable", "stale divergence")
    }
    standing = collections.Counter(matrix.standing(r, ids.parse(t)[3] in convention_cases) for t, r in results.items())
    at_precision = sum(bool(matrix.precision_mark(r)) for r in results.values() if r["outcome"] == "passed")
    bugs = standing["known bug"] + standing["diverged"]
    failed = len(results) - count["passed"] - count["diverged"] - count["not applicable"]
    margins = [t["margin"] for t in results.values() if t["margin"] is not None]
    ulps = [t["ulp"] for t in results.values() if t.get("ulp") is not None]
    worst = f"{max(margins):.3f}" if margins else "-"
    worst_ulp = f"{max(ulps):.2f}" if ulps else "-"
    ran = count["passed"] + count["diverged"] + count["not applicable"]
    problem = None
    changed = reports.changed_since(report)
    if changed:  # a fix rerun one test at a time stacked on the broken run: its other results are the old code's
        status = problem = (
            f"MIXED: the adapter changed since its complete run of {changed}, and only some tests ran again: "
            f"`attention-conformance run --adapter {report['adapter']}` reruns it whole"  # merged, `name` has a host
        )
    elif failed:
        first = (root_cause.pick(results) or (_failing(results)[0],))[0]  # the earliest stage's, else the first stale
        stale = count["stale divergence"]
        parts = [f"{failed - stale} failed"] * bool(failed - stale) + [
            f"{stale} known divergence(s) now conform"
        ] * bool(stale)
        status = f"FAILED: {', '.join(parts)} (read first: {first})"
        said = root_cause.line(results) or f"{first}: {results[first].get('message') or results[first]['outcome']}"
        problem = f"{', '.join(parts)}; {said}"
    elif not report["complete"] or ran < report["expected"]:
        status = problem = f"INCOMPLETE: {ran} of {report['expected']} ran"
    else:
        notes = (
            [f"{at_precision} at a declared precision"] * bool(at_precision)
            + [f"{standing['raised as declared']} raised as declared"] * bool(standing["raised as declared"])
            + [f"{standing['on its side']} on a declared side"] * bool(standing["on its side"])
            + [f"{standing['other convention']} by another convention"] * bool(standing["other convention"])
            + [f"{bugs} known bugs"] * bool(bugs)
            + [f"{count['not applicable']} not applicable"] * bool(count["not applicable"])
        )
        status = "conforms" + (f" ({', '.join(notes)})" if notes else "")
    devices = ", ".join(f"{d} {state}" for d, state in report.get("devices", {}).items())
    cells = [
        name,
        report["version"],
        report.get("mode", {"name": "eager"})["name"],
        ", ".join(report["dtypes"]),
        devices,
        str(report["expected"]),
        str(count["passed"]),
        str(failed),
        worst,
        worst_ulp,
        status,
    ]
    return cells, problem


def _excused(found, convention_cases):
    """The verdict's account of what was declared: the tests excused whatever their numbers (conventions, known bugs)
    apart from those a declaration still judged (a precision, a raise)."""
    standing, judged, boundless = collections.Counter(), 0, 0
    for report in found.values():
        for test_id, result in report["tests"].items():
            standing[matrix.standing(result, ids.parse(test_id)[3] in convention_cases)] += 1
            mark = matrix.precision_mark(result) if result["outcome"] == "passed" else ""
            judged, boundless = judged + bool(mark), boundless + mark.endswith("(no bound)")
    bugs = standing["known bug"] + standing["diverged"]
    unbounded = standing["other convention"] + bugs + boundless
    return (
        f"excused without a bound: {unbounded} tests ({standing['other convention']} by another convention, {bugs} "
        f"known bugs, {boundless} at a declared precision with no bound there); judged by their declarations: "
        f"{judged - boundless} at a declared precision, {standing['raised as declared']} raised as declared, "
        f"{standing['on its side']} on a declared side"
    )


def _short(test_id, mutant):
    return test_id.replace(f"[{mutant}-", "[")


def kill_rate(directories):
    """(the headline, [[adapter, expectation, result, behaved as expected?]], what went wrong) for the wrong
    adapters the folders record: the headline is None where there are none (an outside run has no wrong adapters
    of its own)."""
    names, ran = reports.mutants(directories)
    if not names:
        return None, [], []
    rows, bad, caught, wrong = [], [], 0, 0
    for name in names:
        result = ran.get(name)
        if result is None:
            rows.append([name, "-", "NOT RUN (its framework's environment did not report)", False])
            bad.append(f"{name} not run")
            continue
        hits = result["caught_by"]
        if result["expected"] == "caught":
            wrong += 1
            caught += bool(hits)
            bad += [] if hits else [f"{name} not caught"]
            shown = ", ".join(_short(h, name) for h in hits[:3]) + (
                f" and {len(hits) - 3} more" if len(hits) > 3 else ""
            )
            rows.append(
                [
                    name,
                    "must fail",
                    f"{'caught by ' + shown if hits else 'NOT CAUGHT'} ({len(hits)} of {result['cases']})",
                    bool(hits),
                ]
            )
        else:
            bad += [f"{name} false alarm"] if hits else []
            shown = ", ".join(_short(h, name) for h in hits[:3])
            rows.append(
                [
                    name,
                    "must pass",
                    f"{'passed all ' + str(result['cases']) if not hits else 'FALSE ALARM: ' + shown}",
                    not hits,
                ]
            )
    rate = f"{100 * caught / wrong:.0f}%" if wrong else "-"
    return f"Wrong adapters caught (kill rate): {caught} of {wrong}, {rate}", rows, bad


NOTES = [
    "worst margin: largest |error| / tolerance over the computed expected values (1.0 would use the whole budget);",
    "worst ULP: largest distance from the float64 expectation, in units of the last place of the dtype",
]
KILL_HEADER = ["adapter (tests/mutants)", "expectation", "result (failing tests)"]
HEADER = [
    "framework",
    "version",
    "mode",
    "dtypes",
    "devices",
    "tests",
    "passed",
    "failed",
    "worst margin",
    "worst ULP",
    "status",
]


def _table(rows):
    header = HEADER
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]

    def line(cells):
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    return [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(cells) for cells in rows]


def main(directories=(reports.DEFAULT_DIR,), names=None, out=reports.DEFAULT_DIR, html=None):
    """The table, the kill rate and the matrix from one reports folder, or merged from several (one per
    machine), written to `out` with the page (index.html there, or `html`); every adapter in `names` must
    have reported. Returns the exit code."""
    absent = [str(d) for d in directories if not Path(d).is_dir()]
    if absent and (len(directories) > 1 or str(directories[0]) != str(reports.DEFAULT_DIR)):
        print(f"error: no such reports folder: {', '.join(absent)}", file=sys.stderr)
        return 2  # an input the command line names is wrong, as argparse's usage errors
    try:
        found, unfinished = reports.merge(directories) if not absent else ({}, [])
    except reports.ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    reported = {r["adapter"] for r in found.values() if not r.get("published")}  # the published run asks nothing
    if not (found or unfinished or names):
        print(
            f"error: no reports in {', '.join(map(str, directories))}: run `attention-conformance run --adapter NAME` "
            "first (or pass --reports DIR)",
            file=sys.stderr,
        )
        return 1

    # A folder's unfinished run is shown (and fails) whatever another folder holds for that adapter.
    def asked(column):
        return not names or column in names or modes.split(column)[0] in names

    unfinished = [(adapter, why) for adapter, why in unfinished if asked(adapter)]
    never = sorted(set(names or ()) - reported - {adapter for adapter, _ in unfinished})
    # The spec the reports were made from (reports.merge refuses two); with no report at all, the installed one,
    # so a run that reported nothing still shows every case, each cell MISSING.
    outline = next(iter(found.values()))["outline"] if found else reports.outline(loader.load())
    found = {key: report for key, report in found.items() if asked(report["adapter"]) or report.get("published")}
    convention_cases = {case_id for case_id, _, convention in outline["cases"] if convention}
    rows, failures, conforming = [], [], []
    for key, report, missing in (
        [(k, found[k], None) for k in sorted(found)]
        + [(a, None, why) for a, why in unfinished]
        + [
            (a, None, f"no report named {a!r} (the reports are of {', '.join(sorted(reported))})" if reported else None)
            for a in never
        ]
    ):
        cells, problem = row(key, report, convention_cases, missing)
        rows.append(cells)
        conforming.append(problem is None)
        if problem:
            failures.append(f"{key}: {problem}")
    print("\n".join(_table(rows)))
    print("\n" + "\n".join(NOTES))
    measured_on = sorted({machine.one_line(r["machine"]) for r in found.values() if "machine" in r})
    print("measured on: " + ("; ".join(measured_on) or "not recorded"))
    reran = [
        f"{key} ({len({t for r in report['reruns'] for t in r.get('tests', ())})} tests, "
        f"last {report['reruns'][-1]['finished']})"
        for key, report in sorted(found.items())
        if report.get("reruns")
    ]
    if reran:  # a narrowed run put on top of a complete one (run/reports.py: on_top)
        print("rerun on top of a complete run: " + "; ".join(reran))
    headline, kill_rows, wrong = kill_rate(directories)
    if headline:
        print(f"\n{headline}\n")
        print(
            "\n".join(
                ["| " + " | ".join(KILL_HEADER) + " |", "|---|---|---|"]
                + [f"| {' | '.join(r[:3])} |" for r in kill_rows]
            )
        )
    if wrong:
        failures.append("wrong adapters: " + ", ".join(wrong))
    built = matrix.build(found, outline, sorted(({a for a, _ in unfinished} | set(never)) - reported))
    _, written = matrix.write(built, out)
    conforms = (
        f"conforms: {', '.join(sorted(found))} ({len(found)} adapter(s)"
        + (f", merged from {len(directories)} folders" if len(directories) > 1 else "")
        + f"); {_excused(found, convention_cases)}"
    )
    content = page.data(
        summary={"header": HEADER, "rows": rows, "conforming": conforming, "notes": NOTES},
        verdict={"conforms": not failures, "line": "FAILED: " + "; ".join(failures) if failures else conforms},
        measured_on=measured_on,
        kill={"line": headline, "header": KILL_HEADER, "rows": kill_rows} if headline else None,
        built=built,
        found=found,
        directories=directories,
    )
    where = Path(out) / "index.html" if html is None else html
    written.append(page.write(content, where))  # a refusal is writing.Refused: one line, exit 74 (cli.py)
    verdict = "FAILED: " + "; ".join(failures) if failures else conforms
    # The files on the first line, a note for one not written (no matplotlib) under it, so both stay short.
    print(f"\nConformance matrix ({', '.join(str(w) for w in written if isinstance(w, Path))})")
    print("".join(f"{w}\n" for w in written if not isinstance(w, Path)))
    print(matrix.compact(built))
    print(f"The full matrix, a row per case and a column per framework and dtype: {written[0]}")
    print(f"and on the page, each cell's tests a click away: {written[-1]}")
    if failures:
        sys.stdout.flush()  # the verdict is the last line, also where stdout and stderr share a pipe
        print(verdict, file=sys.stderr)
        return 1
    print(verdict)
    return 0
