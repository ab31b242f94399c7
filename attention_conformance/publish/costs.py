"""What each family of cases costs the test run (issue 54): seconds per family, per column and per tier.

    tox -p auto && tox -m full -p auto && attention-conformance publish     # docs/speed.md's family costs

Every family multiplies into every column, dtype, mode, portability setting and self-check, so a new one states its
price before it lands. Made from what the two tiers' runs record in the reports folder, nothing timed again:

- a column's run: each test's seconds (its report's RESULT "seconds"); the first test of a case pays for the
  adapter's call and the oracle's answers, so a family's seconds are its cases' whole cost in that column;
- the self-checks: each wrong adapter's seconds (mutants-<adapter>.json), split evenly over the families it ran;
- the portability run: each column's rerun seconds (portability.json), split by the families' shares of that
  column's own run, over the families its reruns selected (`-k`, for the other modes).

What no family causes (importing the framework, collecting, the summary, the fuzz self-checks, building
environments) is in no row: the tiers' wall times beside the table say what they add.
"""

import collections
import json
from pathlib import Path

from attention_conformance import machine, modes
from attention_conformance.contract import ids
from attention_conformance.run import reports


def data(directory):
    """costs.json's content from a reports folder after both tiers, or None where no run recorded its seconds."""
    runs = {column: r for column, r in reports.runs(directory).items() if not reports.unfinished(r)}
    runs = {column: r for column, r in runs.items() if any("seconds" in t for t in r["tests"].values())}
    if not runs:
        return None
    outline = next(iter(runs.values()))["outline"]
    family_of = {case_id: family for case_id, family, _ in outline["cases"]}
    columns = {column: _per_family(report, family_of) for column, report in sorted(runs.items())}
    selfcheck = collections.Counter()
    for result in reports.mutants([directory])[1].values():
        timed = result.get("families", []) if "seconds" in result else []  # none before issue 54
        selfcheck.update({family: result["seconds"] / len(timed) for family in timed})
    portability = collections.Counter()
    path = Path(directory) / "portability.json"
    for result in json.loads(path.read_text())["results"] if path.exists() else []:
        rerun = sum(s for s in result.get("seconds", {}).values() if isinstance(s, (int, float)))
        portability.update(_shared(rerun, columns.get(result["adapter"], {}), result.get("pytest_args", [])))
    first = collections.Counter()
    other = collections.Counter()
    for column, seconds in columns.items():
        (first if modes.split(column)[1] is None else other).update(seconds)
    return {
        "families": outline["families"],
        "columns": {c: dict(s) for c, s in columns.items()},
        "first_modes": dict(first),
        "self_checks": dict(selfcheck),
        "other_modes": dict(other),
        "portability": dict(portability),
        "measured_on": sorted({machine.one_line(r["machine"]) for r in runs.values()}),
        "finished": max(r["finished"] for r in runs.values()),
    }


def _per_family(report, family_of):
    seconds = collections.Counter()
    for test_id, result in report["tests"].items():
        parsed = ids.parse(test_id)
        if parsed and "seconds" in result:
            seconds[family_of.get(parsed[3], "(not in this spec)")] += result["seconds"]
    return seconds


def _shared(total, shares, pytest_args):
    """`total` seconds split over the families by their `shares`, only those a `-k a or b` in `pytest_args` keeps."""
    keyword = pytest_args[pytest_args.index("-k") + 1] if "-k" in pytest_args else None
    kept = {f: s for f, s in shares.items() if keyword is None or ids.family_keyword(f) in keyword.split(" or ")}
    whole = sum(kept.values())
    return {f: total * s / whole for f, s in kept.items()} if whole else {}


def table(doc):
    """docs/speed.md's family costs, from costs.json."""
    fams = doc["families"]

    def s(counter, family):
        return counter.get(family, 0.0)

    lines = [
        f"Measured on {'; '.join(doc['measured_on'])}, {doc['finished'][:10]}: seconds of test time, one process "
        "each (two run side by side under `-p auto`).",
        "",
        "| family | first modes s | self-checks s | the README's test command s | other modes s | portability s "
        "| CI s | share of CI |",
        "|---|---|---|---|---|---|---|---|",
    ]
    tiers = {
        f: (s(doc["first_modes"], f), s(doc["self_checks"], f), s(doc["other_modes"], f), s(doc["portability"], f))
        for f in fams
    }
    whole = sum(sum(t) for t in tiers.values()) or 1.0
    for family in [*fams, "all families"]:
        t = tiers[family] if family in tiers else tuple(map(sum, zip(*tiers.values(), strict=True)))
        readme, ci = t[0] + t[1], sum(t)
        lines.append(
            f"| {family} | {t[0]:.0f} | {t[1]:.0f} | {readme:.0f} | {t[2]:.0f} | {t[3]:.0f} | {ci:.0f} "
            f"| {100 * ci / whole:.0f}% |"
        )
    cols = list(doc["columns"])
    lines += ["", "| family | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for family in fams:
        lines.append(f"| {family} | " + " | ".join(f"{doc['columns'][c].get(family, 0.0):.1f}" for c in cols) + " |")
    return "\n".join(lines)
