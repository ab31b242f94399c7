"""The per-framework summary table, the wrong-adapter kill rate and the matrix, from the reports.

    attention-conformance summary    # exit 1 unless every adapter ran completely and conformed,
                                     # and every wrong adapter a run defined was run and caught

An adapter with no report did not run (or could not import its framework): it shows as
MISSING, never as passing.
"""

from attention_conformance import contract, matrix, reports


def row(name, report):
    if report is None:
        return [name, "-", "-", "-", "-", "-", "-", "-", "-", "MISSING: no report (environment not run, or framework did not import)"], False
    tests = report["tests"].values()
    passed = sum(t["outcome"] == "passed" for t in tests)
    diverged = sum(t["outcome"] == "diverged" for t in tests)
    not_applicable = sum(t["outcome"] == "not applicable" for t in tests)
    failed = len(report["tests"]) - passed - diverged - not_applicable
    margins = [t["margin"] for t in tests if t["margin"] is not None]
    ulps = [t["ulp"] for t in tests if t.get("ulp") is not None]
    worst = f"{max(margins):.3f}" if margins else "-"
    worst_ulp = f"{max(ulps):.2f}" if ulps else "-"
    if failed:
        status = f"FAILED: {failed} test(s)"
    elif not report["complete"] or passed + diverged + not_applicable < report["expected"]:
        status = f"INCOMPLETE: {passed + diverged + not_applicable} of {report['expected']} ran"
    else:
        notes = [f"{diverged} known divergences"] * bool(diverged) + [f"{not_applicable} not applicable"] * bool(not_applicable)
        status = "conforms" + (f" ({', '.join(notes)})" if notes else "")
    devices = ", ".join(f"{d} {state}" for d, state in report.get("devices", {}).items())
    cells = [name, report["version"], ", ".join(report["dtypes"]), devices, str(report["expected"]), str(passed), str(failed),
             worst, worst_ulp, status]
    return cells, status.startswith("conforms")


def _short(test_id, mutant):
    return test_id.replace(f"[{mutant}-", "[")


def kill_rate(directory):
    """Lines of the wrong-adapter table, and whether every one was run and behaved as expected."""
    names, ran = reports.mutants(directory)
    if not names:  # an outside run has no wrong adapters of its own
        return [], True
    lines, ok, caught, wrong = [], True, 0, 0
    for name in names:
        result = ran.get(name)
        if result is None:
            lines.append(f"| {name} | - | NOT RUN (its framework's environment did not report) |")
            ok = False
            continue
        hits = result["caught_by"]
        if result["expected"] == "caught":
            wrong += 1
            caught += bool(hits)
            ok &= bool(hits)
            shown = ", ".join(_short(h, name) for h in hits[:3]) + (f" and {len(hits) - 3} more" if len(hits) > 3 else "")
            lines.append(f"| {name} | must fail | {'caught by ' + shown if hits else 'NOT CAUGHT'} ({len(hits)} of {result['cases']}) |")
        else:
            ok &= not hits
            lines.append(f"| {name} | must pass | {'passed all ' + str(result['cases']) if not hits else 'FALSE ALARM: ' + ', '.join(_short(h, name) for h in hits[:3])} |")
    rate = f"{100 * caught / wrong:.0f}%" if wrong else "-"
    head = [f"Wrong adapters caught (kill rate): {caught} of {wrong}, {rate}", "",
            "| adapter (tests/mutants) | expectation | result (failing tests) |", "|---|---|---|"]
    return head + lines, ok


def main(directory=reports.DEFAULT_DIR, names=None):
    try:
        found = reports.runs(directory)
    except reports.ReportError as exc:
        print(f"error: {exc}")
        return 1
    names = names or sorted(set(contract.NAMES) | set(found))
    header = ["framework", "version", "dtypes", "devices", "cases", "passed", "failed", "worst margin", "worst ULP", "status"]
    rows, ok = [], True
    for name in names:
        cells, good = row(name, found.get(name))
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
    lines, mutants_ok = kill_rate(directory)
    if lines:
        print()
        print("\n".join(lines))
    print(f"\nConformance matrix (also {directory}/matrix.md, matrix.json, matrix.png)\n")
    print(matrix.write(matrix.build(found, names), directory))
    return 0 if ok and mutants_ok else 1
