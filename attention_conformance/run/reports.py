"""The reports folder: one writer and the readers of what each run leaves behind.

    <adapter>.json          one adapter's run: {"schema", "adapter", "version", "mode", "dtypes", "devices",
                            "host", "machine", "spec_sha256", "outline", "numerics", "complete",
                            "expected", "tests": {test id: RESULT}, "finished"}
                            RESULT = {"outcome": passed | failed | error | diverged | not applicable
                                                 | stale divergence,
                                      "margin", "ulp", "worst", "message", "reason",
                                      "seconds": the test's call (absent before issue 54)}
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
                            adapter_sha256: the adapter's source files' digest (source_sha256)
                            reruns (only where a narrowed run went on top of a complete one,
                            on_top): [{"complete_run_finished", "adapter_sha256"}, then
                            {"finished", "tests": [ids], "adapter_sha256"} for each rerun, oldest first]
                            While the tests run the file says only {"adapter", "started",
                            "complete": false, "tests": {}}: a run that dies leaves that behind,
                            never its last result. An adapter that does not import, or whose
                            NOT_APPLICABLE names nothing, has its report deleted.
    mutants-<adapter>.json  the suite's wrong adapters for that adapter: {"schema", "adapter",
                            "defined": [names], "mutants": {name: {"expected", "cases", "caught_by",
                            "seconds", "families": the families of the cases it ran (both absent before
                            issue 54)}}}

Each tox environment (or machine) writes its own files; the summary and the matrix read them, from
one folder or merged from several (one per machine). A file with another schema number, folders
made from different specs, or two runs that would fill the same column are refused, never mixed.
"""

import contextlib
import gzip
import hashlib
import json
import platform
import time
from pathlib import Path

from attention_conformance import machine, modes, writing
from attention_conformance.cases import plan
from attention_conformance.paths import PUBLISHED_DIR

SCHEMA = 3  # 2: RESULT's reason, the stale divergence outcome, the started marker; 3: the outline
DEFAULT_DIR = Path("reports")  # relative to where the run starts: the checkout in tox, anywhere for a user


class ReportError(ValueError):
    pass


def file_name(adapter):
    """A report's file name: a dotted module path becomes underscores."""
    return adapter.replace(".", "_") + ".json"


def _write(directory, name, content):
    data = (json.dumps({"schema": SCHEMA} | content, indent=1) + "\n").encode()
    writing.whole(Path(directory) / name, data, option="--reports")


def _read(path):
    try:
        data = Path(path).read_bytes()
        content = json.loads(gzip.decompress(data) if str(path).endswith(".gz") else data)
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path}: unreadable report: {exc}") from None
    if not isinstance(content, dict) or content.get("schema") != SCHEMA:
        raise ReportError(
            f"{path}: report schema {content.get('schema') if isinstance(content, dict) else None!r}, "
            f"this suite reads {SCHEMA}: rerun the environment that wrote it"
        )
    return content


def _last(directory, adapter):
    return Path(directory) / f".{file_name(adapter)}.last"


def hold(directory, adapters):
    """Put each adapter's last finished report aside (a rename: putting it back needs no space) and leave a
    start marker in its place, so a run that dies shows as unfinished, never as its last result. Returns
    the adapters for `restore` and `release`. Refused (nothing changed) where the folder takes no marker."""
    held = []
    try:
        for adapter in adapters:
            path = Path(directory) / file_name(adapter)
            if path.is_file() and _finished(path):  # a marker a killed run left is not kept over what it hid
                try:
                    path.replace(_last(directory, adapter))
                except OSError as exc:
                    raise writing.refusal(path, exc, "--reports") from None
            held.append(adapter)
            _write(
                directory,
                file_name(adapter),
                {"adapter": adapter, "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "complete": False, "tests": {}},
            )
    except writing.Refused:
        restore(directory, held)
        raise
    return held


def restore(directory, adapters):
    """Put back what `hold` put aside: a run that stopped before its report, or could not write it, leaves
    the last finished one. A report another run finished meanwhile stays."""
    for adapter in adapters:
        path = Path(directory) / file_name(adapter)
        with contextlib.suppress(OSError):
            if _last(directory, adapter).is_file():
                _last(directory, adapter).replace(path)
            elif path.is_file() and not _finished(path):
                path.unlink()


def release(directory, adapters):
    """Drop what `hold` put aside, once each adapter's new report is written."""
    for adapter in adapters:
        with contextlib.suppress(OSError):
            _last(directory, adapter).unlink(missing_ok=True)


def _finished(path):
    try:
        return "finished" in json.loads(Path(path).read_text())
    except (OSError, ValueError, TypeError):
        return False


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


def described(module, spec, seen, ran):
    """A run report's mode, dtypes, devices and source digest for adapter `module`, which sees devices `seen` and ran
    on `ran`."""
    return {
        "adapter_sha256": source_sha256(module),
        "mode": {"name": module.MODE, "runs": modes.declared(module)[module.MODE]},
        "dtypes": plan.declared_dtypes(spec, module),
        "devices": {
            d: "ran" if d == ran else ("unavailable" if d not in seen else "available, not run") for d in ("cpu", "gpu")
        },
    }


def source_sha256(module):
    """The digest of an adapter's source: its file, or every module of its package. A narrowed rerun compares it with
    the complete run's it goes on top of (changed_since)."""
    where = Path(getattr(module, "__file__", None) or "")
    files = sorted(where.parent.glob("*.py")) if where.name == "__init__.py" else [where]
    digest = hashlib.sha256()
    for path in files:
        with contextlib.suppress(OSError):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def changed_since(report):
    """When the complete run a report's reruns sit on finished, where the adapter's source changed after it (its
    other results are then the old adapter's); else None."""
    reruns = report.get("reruns") or []
    digests = {r.get("adapter_sha256") for r in reruns} - {None}
    return reruns[0].get("complete_run_finished") if len(digests) > 1 else None


def on_top(directory, adapter, run):
    """A narrowed run's report (`run`, write_run's arguments) and a line that says what it is: its results put on
    top of the adapter's last complete run, which `hold` put aside, where that ran the same spec, version and mode;
    else the narrowed run alone, marked incomplete. A rerun of one test never undoes a whole run."""
    try:
        last = json.loads(_last(directory, adapter).read_text())
    except (OSError, ValueError):
        last = None
    same = ("spec_sha256", "version", "mode")
    if not isinstance(last, dict) or not last.get("complete") or "finished" not in last:
        return run, "narrowed by pytest arguments, so marked incomplete: a summary needs a complete run"
    differs = [key for key in same if last.get(key) != run[key]] + ["schema"] * (last.get("schema") != SCHEMA)
    if differs:
        said = {"spec_sha256": "spec", "version": f"version() {last.get('version')!r}, now {run['version']!r}"}
        return run, (
            "narrowed by pytest arguments, so marked incomplete, in place of the complete run of "
            f"{last['finished']}: that one ran another {', '.join(said.get(k, k) for k in differs)}; "
            f"`attention-conformance run --adapter {adapter}` runs it whole"
        )
    rerun = {
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "tests": sorted(run["tests"]),
        "adapter_sha256": run.get("adapter_sha256"),
    }
    first = {"complete_run_finished": last["finished"], "adapter_sha256": last.get("adapter_sha256")}
    reruns = last.get("reruns") or [first]  # its first entry: when it ran whole, and what
    stacked = run | {"complete": True, "tests": last["tests"] | run["tests"], "reruns": [*reruns, rerun]}
    said = f"narrowed by pytest arguments: its {len(run['tests'])} results on top of the complete run of "
    said += reruns[0]["complete_run_finished"]
    if changed_since(stacked):
        said += (
            f", but the adapter changed since, so its other results are the old adapter's: "
            f"`attention-conformance run --adapter {adapter}` reruns it whole"
        )
    return stacked, said


def write_run(
    directory,
    adapter,
    *,
    version,
    mode,
    dtypes,
    devices,
    spec,
    spec_sha256,
    numerics,
    complete,
    expected,
    tests,
    reruns=None,
    adapter_sha256=None,
):
    """One adapter's run report. `reruns`: the narrowed runs put on top of a complete one ([{"finished", "tests"}])."""
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
        }
        | ({"adapter_sha256": adapter_sha256} if adapter_sha256 else {})
        | ({"reruns": reruns} if reruns else {}),
    )


def write_mutants(directory, adapter, defined, mutants):
    _write(directory, f"mutants-{file_name(adapter)}", {"adapter": adapter, "defined": defined, "mutants": mutants})


def runs(directory):
    """{adapter: report} for every run report in the folder."""
    found = {}
    for path in sorted([*Path(directory).glob("*.json"), *Path(directory).glob("*.json.gz")]):
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


def _published(directory):
    return Path(directory).resolve() == PUBLISHED_DIR.resolve()


def publish(directory, columns, into):
    """The published run's reports (`columns` of folder `directory`) gzipped into `into` (spec/published in a
    checkout), what `summary --with-published` puts beside a user's own."""
    for column in columns:
        data = (Path(directory) / file_name(column)).read_bytes()
        writing.whole(Path(into) / f"{file_name(column)}.gz", gzip.compress(data, 9, mtime=0))


def unpublished(into, columns):
    """The columns `into` publishes that `columns` lacks: a run of the first tier alone would drop the compiled and
    eager columns from the page (publishing deleted them before)."""
    return sorted(
        p.name.removesuffix(".json.gz")
        for p in Path(into).glob("*.json.gz")
        if p.name.removesuffix(".json.gz") not in columns
    )


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
            host = f"published {report['finished'][:10]}" if _published(directory) else report.get("host", "?")
            key = (
                report["adapter"] if len(directories) == 1 else f"{report['adapter']} {report['version']} {ran}@{host}"
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
            # The published run's, in memory only: shown beside a user's own, never asked for (summary --adapter)
            found[key], origin[key] = report | ({"published": True} if _published(directory) else {}), str(directory)
    return found, stopped
