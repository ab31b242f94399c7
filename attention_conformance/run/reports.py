"""The reports folder: one writer and the readers of what each run leaves behind.

    <adapter>.json          one adapter's run: {"schema", "adapter", "version", "mode", "dtypes", "devices",
                            "host", "machine", "spec_sha256", "outline", "numerics", "complete",
                            "expected", "tests": {test id: RESULT}, "finished"}
                            RESULT = {"outcome": passed | failed | error | diverged | not applicable
                                                 | stale divergence,
                                      "margin", "ulp", "worst", "message", "reason"}
                            worst (a passed test; else None, and absent from reports
                            written before it was kept): the element that set the margin,
                            {"element", "got", "expected", "error", "allowed", "tolerance",
                            "from": where the expected value came from}
                            message: what went wrong (a failure's first line, or what a known
                            divergence did); reason: why it is not a conformance failure (the
                            adapter's not-applicable reason, the known divergence's reason)
                            machine = {"host", "cpu", "isa", "half", "threads", "switches"}: where
                            the margins were measured (attention_conformance/machine.py)
                            mode = {"name", "runs"}: the mode the column ran (modes.py) and
                            what that means for the framework; absent from reports written
                            before modes: eager. <adapter> is the column, "<adapter>-<mode>"
                            unless the mode is the adapter's first
                            outline = {"families": [names], "cases": [[id, family, states a
                            convention?]]}: the spec the run was made from, as the summary and the
                            matrix show it (whichever spec is installed where they run)
                            While the tests run the file says only {"adapter", "started",
                            "complete": false, "tests": {}}: a run that dies leaves that behind,
                            never its last result. An adapter that does not import, or whose
                            NOT_APPLICABLE names nothing, has its report deleted.
    mutants-<adapter>.json  the suite's wrong adapters for that adapter: {"schema", "adapter",
                            "defined": [names], "mutants": {name: {"expected", "cases", "caught_by"}}}

Each tox environment (or machine) writes its own files; the summary and the matrix read them, from
one folder or merged from several (one per machine). A file with another schema number, folders
made from different specs, or two runs that would fill the same column are refused, never mixed.
"""

import json
import platform
import time
from pathlib import Path

from attention_conformance import machine

SCHEMA = 3  # 2: RESULT's reason, the stale divergence outcome, the started marker; 3: the outline
DEFAULT_DIR = Path("reports")  # relative to where the run starts: the checkout in tox, anywhere for a user


class ReportError(ValueError):
    pass


def file_name(adapter):
    """A report's file name: a dotted module path becomes underscores."""
    return adapter.replace(".", "_") + ".json"


def _write(directory, name, content):
    _replace(Path(directory) / name, (json.dumps({"schema": SCHEMA} | content, indent=1) + "\n").encode())


def _replace(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.partial")
    try:
        temporary.write_bytes(data)
        temporary.replace(path)  # a reader never sees half a report
    finally:
        temporary.unlink(missing_ok=True)  # after a failed write or replace, nothing left beside it


def _read(path):
    try:
        content = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path}: unreadable report: {exc}") from None
    if not isinstance(content, dict) or content.get("schema") != SCHEMA:
        raise ReportError(
            f"{path}: report schema {content.get('schema') if isinstance(content, dict) else None!r}, "
            f"this suite reads {SCHEMA}: rerun the environment that wrote it"
        )
    return content


def hold(directory, adapters):
    """Replace each adapter's last report with a start marker, so a run that dies shows as unfinished,
    never as its last result; return {adapter: the last report's bytes, or None} for `restore`."""
    kept = {}
    for adapter in adapters:
        path = Path(directory) / file_name(adapter)
        kept[adapter] = path.read_bytes() if path.is_file() else None
        _write(
            directory,
            file_name(adapter),
            {"adapter": adapter, "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "complete": False, "tests": {}},
        )
    return kept


def restore(directory, kept):
    """Put back what `hold` replaced: a run that stopped before any test leaves the folder as it was."""
    for adapter, data in kept.items():
        path = Path(directory) / file_name(adapter)
        if data is None:
            path.unlink(missing_ok=True)
        else:
            _replace(path, data)


def forget(directory, adapter):
    """Delete an adapter's report (and its wrong-adapter record): one that cannot run as it is now has none."""
    (Path(directory) / file_name(adapter)).unlink(missing_ok=True)
    forget_mutants(directory, adapter)


def unfinished(report):
    """Why a report is only a start marker, or None for a finished run."""
    if "finished" in report:
        return None
    return (
        f"started {report.get('started', '?')} and never finished (crashed or stopped; rerun it, "
        "or delete the file if that adapter is gone)"
    )


def forget_mutants(directory, adapter):
    """The same for the wrong-adapter record, before the self-checks run."""
    (Path(directory) / f"mutants-{file_name(adapter)}").unlink(missing_ok=True)


def outline(spec):
    """The spec's families and cases in order, as a run report carries them."""
    return {
        "families": list(spec.families),
        "cases": [[case.id, case.family, bool(case.convention)] for case in spec.cases.values()],
    }


def write_run(
    directory, adapter, *, version, mode, dtypes, devices, spec, spec_sha256, numerics, complete, expected, tests
):
    _write(
        directory,
        file_name(adapter),
        {
            "adapter": adapter,
            "version": version,
            "mode": mode,
            "dtypes": dtypes,
            "devices": devices,
            "host": platform.node(),
            "machine": machine.describe(),
            "spec_sha256": spec_sha256,
            "outline": outline(spec),
            "numerics": numerics,
            "complete": complete,
            "expected": expected,
            "tests": tests,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
        },
    )


def write_mutants(directory, adapter, defined, mutants):
    _write(directory, f"mutants-{file_name(adapter)}", {"adapter": adapter, "defined": defined, "mutants": mutants})


def runs(directory):
    """{adapter: report} for every run report in the folder."""
    found = {}
    for path in sorted(Path(directory).glob("*.json")):
        if path.name.startswith("mutants-") or path.stem in ("matrix", "benchmark", "portability"):
            continue
        report = _read(path)
        found[report["adapter"]] = report
    return found


def mutants(directories):
    """(defined wrong-adapter names, {name: result}) over every mutants report in the folders."""
    defined, results = [], {}
    for directory in directories:
        for path in sorted(Path(directory).glob("mutants-*.json")):
            report = _read(path)
            defined += report["defined"]
            results |= report["mutants"]
    return sorted(defined), results


def merge(directories):
    """({column prefix: finished run report}, [(adapter, why its run did not finish)]) from one folder or several.
    From one folder a prefix is the adapter name; merged, it is "adapter version device@host", so each
    column says where it came from."""
    found, origin, specs, stopped = {}, {}, {}, []
    for directory in directories:
        for report in runs(directory).values():
            why = unfinished(report)
            if why is not None:
                stopped.append((report["adapter"], f"{why} ({directory})"))
                continue
            ran = next((d for d, state in report.get("devices", {}).items() if state == "ran"), "cpu")
            key = (
                report["adapter"]
                if len(directories) == 1
                else f"{report['adapter']} {report['version']} {ran}@{report.get('host', '?')}"
            )
            if key in found:
                raise ReportError(f"{directory}: {key!r} is already reported by {origin[key]}: two runs for one column")
            specs.setdefault(report.get("spec_sha256"), str(Path(directory) / f"{report['adapter']}.json"))
            if len(specs) > 1:
                (first, where), (other, here) = list(specs.items())[:2]
                raise ReportError(
                    f"{here}: made from spec {str(other)[:12]}, but {where} from spec {str(first)[:12]}: "
                    "reports merge only when every machine ran the same spec (rerun the older one, or move it out)"
                )
            found[key], origin[key] = report, str(directory)
    return found, stopped
