"""The per-framework summary table, the wrong-adapter kill rate and the matrix, from the reports.

    attention-conformance summary    # exit 1 unless every adapter ran completely and conformed,
                                     # and every wrong adapter a run defined was run and caught

An adapter with no report did not run (or could not import its framework): it shows as
MISSING, never as passing.
"""

from attention_conformance import contract, loader, machine, matrix, plan, reports


def row(name, report, convention_cases=()):
    if report is None:
        return [name, "-", "-", "-", "-", "-", "-", "-", "-", "MISSING: no report (environment not run, or framework did not import)"], False
    tests = report["tests"].values()
    passed = sum(t["outcome"] == "passed" for t in tests)
    diverged = sum(t["outcome"] == "diverged" for t in tests)
    other_convention = sum(r["outcome"] == "diverged" and plan.parse(t)[3] in convention_cases for t, r in report["tests"].items())
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
        notes = ([f"{diverged - other_convention} known divergences"] * bool(diverged - other_convention)
                 + [f"{other_convention} by another convention"] * bool(other_convention)
                 + [f"{not_applicable} not applicable"] * bool(not_applicable))
        status = "conforms" + (f" ({', '.join(notes)})" if notes else "")
    devices = ", ".join(f"{d} {state}" for d, state in report.get("devices", {}).items())
    cells = [name, report["version"], ", ".join(report["dtypes"]), devices, str(report["expected"]), str(passed), str(failed),
             worst, worst_ulp, status]
    return cells, status.startswith("conforms")


def _short(test_id, mutant):
    return test_id.replace(f"[{mutant}-", "[")


def kill_rate(directories):
    """Lines of the wrong-adapter table, and whether every one was run and behaved as expected."""
    names, ran = reports.mutants(directories)
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


def main(directories=(reports.DEFAULT_DIR,), names=None):
    """The table, the kill rate and the matrix from one reports folder, or merged from several (one per
    machine); every adapter in `names` (default: the built-in ones and any other reported) must have run."""
    try:
        found = reports.merge(directories)
    except reports.ReportError as exc:
        print(f"error: {exc}")
        return 1
    names = names or sorted(set(contract.NAMES) | {r["adapter"] for r in found.values()})
    found = {key: report for key, report in found.items() if report["adapter"] in names}
    header = ["framework", "version", "dtypes", "devices", "cases", "passed", "failed", "worst margin", "worst ULP", "status"]
    rows, ok = [], True
    convention_cases = {case.id for case in loader.load().cases.values() if case.convention}
    for key in sorted(found) + [n for n in names if n not in {r["adapter"] for r in found.values()}]:
        cells, good = row(key, found.get(key), convention_cases)
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
    measured_on = sorted({machine.one_line(r["machine"]) for r in found.values() if "machine" in r})
    print("measured on: " + ("; ".join(measured_on) or "not recorded (reports older than the machine record)"))
    lines, mutants_ok = kill_rate(directories)
    if lines:
        print()
        print("\n".join(lines))
    out = directories[0]
    print(f"\nConformance matrix (also {out}/matrix.md, matrix.json, matrix.png)\n")
    print(matrix.write(matrix.build(found, names), out))
    return 0 if ok and mutants_ok else 1
