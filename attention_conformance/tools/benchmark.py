"""The suite's own cost per framework, against the floor the framework sets, measured in the same run.

    tox -m conformance -p auto && tox -e benchmark      # every framework and the main job: speed.tables,
                                                        # reports/benchmark.json
    attention-conformance benchmark --adapter torch      # one framework, in an environment that has it (JSON)
    attention-conformance publish                        # put reports/benchmark.json's speed.tables in docs/speed.md

Per framework, in its own environment, after the main job (oracle and XLA caches warm):

floor     the adapter's import, timed inside the whole-spec pytest run, plus the seconds spent inside
          the adapter's own functions in that run (calls.inside_s: the framework's compute, JAX's
          tracing and compiling included), plus starting and exiting a Python that holds the framework
          (a separate process that only imports it).
overhead  the whole-spec run's wall time less its floor: Python and pytest, collection, the oracle's
          cache, comparisons, reports. Targets: at most 10% of the run and 3 ms a test.
cold      the same run on an empty oracle (and XLA) cache, as a first run is, less the framework's own
          first-run work (its extra time inside the adapter: XLA compiling, ONNX exporting); target 2x warm (issue 54).
memory    peak RSS over a bare import, against the largest working set a case needs (from its shapes,
          in float64: inputs, projections, scores and weights, context, output) and the framework's
          allocator baseline (a trivial case's RSS over the bare import); target 2x the working set
          plus the baseline.
speed.findings  where the framework's own time goes (op and dtype), with what was measured about it: its float32
          matmul against NumPy's, its half precision against its float32, its seconds a call.
main job  `tox -m conformance -p auto`, warm, against its floor: the larger of (the frameworks' floors in
          CPU seconds, every thread counted, summed over the cores) and the longest one, plus tox's own
          fixed cost (the same command with every command replaced by `python -c pass`); target 1.3x.
          And cold, the oracle cache empty (the environments and compile caches as they are), against warm: 2x.
A framework's own time is never a miss: it is the floor, reported with what a user should know.
Figures move 10-30% between runs on a shared machine; each table says which CPU it came from.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from attention_conformance import cache, machine, modes, writing
from attention_conformance.cases import loader
from attention_conformance.contract import registry
from attention_conformance.paths import SPEC_DIR
from attention_conformance.publish import speed
from attention_conformance.run import reports
from attention_conformance.tools import columns, measure


def alias_bomb(levels=9, width=9):
    """A flow sequence whose last anchor expands to width**levels numbers (9, 9: 387 million) in ~1 kB."""
    anchors = [f"&l0 [{', '.join(['0.5'] * width)}]"]
    anchors += [f"&l{n} [{', '.join([f'*l{n - 1}'] * width)}]" for n in range(1, levels + 1)]
    return "[" + ", ".join(anchors) + "]"


def refusals():
    """Wall seconds (median of 3) and peak MiB traced to validate the spec, and to refuse it with an
    alias bomb in place of its first case's inputs, against speed.REFUSAL_TARGETS."""
    import tracemalloc

    spec_text = (SPEC_DIR / "attention.yaml").read_text()
    bombed = spec_text.replace("  - id: ", f"  - id: bomb\n    inputs: {alias_bomb()}\n    id_was: ", 1)
    rows = {}
    with tempfile.TemporaryDirectory() as scratch:
        for label, text in (("validate the spec", spec_text), ("refuse an alias bomb", bombed)):
            path = Path(scratch) / "attention.yaml"
            path.write_text(text)
            times, peak = [], 0.0
            for _ in range(3):
                tracemalloc.start()
                t = time.perf_counter()
                try:
                    loader.load_file(path)
                except loader.SpecError:
                    pass
                times.append(time.perf_counter() - t)
                peak = max(peak, tracemalloc.get_traced_memory()[1] / 2**20)
                tracemalloc.stop()
            rows[label] = {"s": statistics.median(times), "peak_mib": peak}
    return {
        label: row | {"ratios": {k: row[k] / speed.REFUSAL_TARGETS[k] for k in speed.REFUSAL_TARGETS}}
        for label, row in rows.items()
    }


# --- in a child process: what a run costs, and where -------------------------------------------------


def _tox(ini, workdir, *extra, cache_folder=None):
    """Wall seconds of `tox -m conformance -p auto` (tox's exit status with it), run as a user runs it:
    outside any tox environment this benchmark may itself be running in; with `cache_folder` as the suite's cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOX_") and k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    if cache_folder:
        env["ATTENTION_CONFORMANCE_CACHE"] = str(cache_folder)
    inside = str(Path(sys.prefix) / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != inside)
    command = [
        sys.executable,
        "-m",
        "tox",
        "-c",
        str(ini),
        "--workdir",
        str(workdir),
        "-m",
        "conformance",
        "-p",
        "auto",
        *extra,
    ]
    t = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=Path(ini).parent)
    return time.perf_counter() - t, done.returncode


def _cold(ini, workdir):
    """The main job as a user's first is (issue 73): the environments built, the compile caches (XLA's, ONNX
    exports) as they are, the oracle cache empty; in a copy of the cache without its oracle, removed after."""
    with tempfile.TemporaryDirectory() as scratch:
        found = cache.directory()
        for part in found.iterdir() if found and found.is_dir() else ():
            if part.is_dir() and part.name != "oracle":
                shutil.copytree(part, Path(scratch) / part.name)
        return _tox(ini, workdir, cache_folder=scratch)


def job_floor(cpu_floors, wall_floors, cores, fixed_s):
    """No schedule of the environments beats their work spread over the cores, nor the longest one. The
    work is CPU seconds: a framework computing on two threads for 10 s holds both cores, and a second
    environment beside it gets none of them."""
    return max(sum(cpu_floors) / cores, max(wall_floors)) + fixed_s


def main_job(rows, ini, workdir):
    """The warm main job against its floor (see the module's docstring)."""
    empty = ["-x", "testenv.commands=python -c pass", "-x", "testenv:summary.commands=python -c pass"]
    fixed_s, fixed_exit = _tox(ini, workdir, *empty)
    warm_s, warm_exit = _tox(ini, workdir)
    cold_s, cold_exit = _cold(ini, workdir)
    cores = machine.describe()["threads"]
    floor = job_floor([r["floor_cpu_s"] for r in rows], [r["floor_s"] for r in rows], cores, fixed_s)
    ratio = warm_s / floor if warm_exit == fixed_exit == 0 else None  # a tox that failed early would look fast
    cold = cold_s / warm_s if warm_exit == cold_exit == 0 else None
    return {
        "s": warm_s,
        "exit": warm_exit,
        "cold_s": cold_s,
        "cold_exit": cold_exit,
        "cold_over_warm": cold,
        "tox_fixed_s": fixed_s,
        "tox_fixed_exit": fixed_exit,
        "cores": cores,
        "frameworks_floor_cpu_s": sum(r["floor_cpu_s"] for r in rows),
        "floor_s": floor,
        "main_job_over_floor": ratio,
        "ratios": ({} if ratio is None else {"main_job_over_floor": ratio / speed.TARGETS["main_job_over_floor"]})
        | ({} if cold is None else {"cold_over_warm": cold / speed.TARGETS["cold_over_warm"]}),
    }


# --- what a user should know ----------------------------------------------------------------------------


# Why a measured slowness is what it is, where we know, by (framework, dtype or None for any); the
# figure beside it is measured in the run.
def _document(rows, job):
    return {
        "machine": machine.describe(),
        "date": time.strftime("%Y-%m-%d"),
        "targets": speed.TARGETS | {"refusal": speed.REFUSAL_TARGETS},
        "main_job": job,
        "frameworks": rows,
        "speed.findings": speed.findings(rows, machine.describe()),
    }


def main(adapter=None, envs=None, scratch=None, tox_ini=None):
    """One adapter here (its JSON on stdout); or every built-in adapter in its own tox environment, then the
    main job (`attention-conformance publish` puts the speed.tables in docs/speed.md)."""
    out = reports.DEFAULT_DIR / "benchmark.json"
    if os.environ.get("ATTENTION_CONFORMANCE_CACHE") == "off":
        raise SystemExit("error: ATTENTION_CONFORMANCE_CACHE=off makes every run cold: the benchmark needs the cache")
    if adapter:
        try:
            registry.load(adapter)  # one line for an adapter that cannot run, before any child starts
        except registry.AdapterError as exc:
            raise SystemExit(
                f"error: {exc}"
            ) from None  # the speed.tables to read on stderr; the JSON, for `tox -e benchmark`, as stdout's last line
        if modes.split(adapter)[1]:  # another mode's column: its cost against its floor and its compile time
            row = measure.measure_mode(adapter)
            print(json.dumps(row))
            return 0 if row["exit"] == 0 else 1
        row = measure.measure(adapter, scratch)
        print(speed.tables(_document([row], None)), file=sys.stderr)
        print(json.dumps(row))
        return 0 if row["exit"] == 0 else 1
    envs = Path(envs or ".tox")
    rows, mode_rows, missing = [], [], []
    for name in registry.NAMES:
        python = envs / name / "bin" / "python"
        if not python.exists():
            missing.append(name)
            continue
        for column in [name, *columns.other_modes(python, name)]:
            done = subprocess.run(
                [str(python), "-m", "attention_conformance", "benchmark", "--adapter", column],
                capture_output=True,
                text=True,
            )
            try:  # measured even where some test failed (exit 1): only a run with no figures is missing
                (rows if column == name else mode_rows).append(json.loads(done.stdout.strip().splitlines()[-1]))
            except (IndexError, ValueError):
                print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
                missing.append(column)
                continue
            print(f"{column}: measured", file=sys.stderr)
    if not rows:
        print(
            f"error: no framework measured (no environment under {envs}, or each failed): run `tox -m conformance` "
            "first, or give --adapter NAME in an environment that has it",
            file=sys.stderr,
        )
        return 1
    job = main_job(rows, tox_ini, envs) if tox_ini and not missing else None
    doc = _document(rows, job) | {"modes": mode_rows, "refusals": refusals()}
    writing.whole(out, (json.dumps(doc, indent=1) + "\n").encode())
    text = speed.tables(doc)
    writing.whole(reports.DEFAULT_DIR / "benchmark.md", (text + "\n").encode())
    print(text)
    print(
        "\nSpec validation and refusal (wall seconds, median of 3; peak MiB traced; target "
        f"<= {speed.REFUSAL_TARGETS['s']:.0f} s and <= {speed.REFUSAL_TARGETS['peak_mib']} MiB):"
    )
    for label, r in doc["refusals"].items():
        print(f"  {label}: {r['s']:.3f} s, {r['peak_mib']:.1f} MiB{' MISS' if max(r['ratios'].values()) > 1 else ''}")
    plotted = speed.plot(rows, reports.DEFAULT_DIR / "scaling.png") if rows else None
    print(
        f"\n{plotted or 'no plot: matplotlib is not installed'}; figures in {out}, tables in {out.with_suffix('.md')}"
    )
    if missing:
        print(
            f"\nnot measured (no environment under {envs}, or it failed): {', '.join(missing)}; "
            "run `tox -m conformance` first"
        )
    return 1 if missing or (job and job["main_job_over_floor"] is None) else 0
