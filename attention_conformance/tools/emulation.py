"""The same verdict on every machine: the spec rerun under the switches that change kernels here.

    tox -e portability                                   every framework, in its own environment
    attention-conformance portability --adapter NAME     one adapter, in this environment
    attention-conformance portability --adapter NAME -k gpt2    other arguments go to pytest

A user's report is merged with reports from other CPUs, so no outcome may depend on which kernels,
instruction set or thread count this machine happened to use. One machine can emulate others:
each setting below is read by a framework at import, so each run is a fresh pytest process.
Every test's outcome must be the same under every setting; every margin is recorded, and the
ones above 0.7 anywhere are listed (a tolerance that close to its edge could fail elsewhere).
Writes reports/portability.json; exit 1 if an outcome changed or a run did not complete.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from attention_conformance import cache, machine, modes, writing
from attention_conformance.contract import registry
from attention_conformance.run import oracle_cache, reports
from attention_conformance.tools import already_run, columns

# Each applies to every framework: a switch for a framework not loaded is ignored. XLA's floor is
# AVX: below it XLA cannot compile float16 at all (LLVM: "Symbols not found: __truncsfhf2", jax
# 0.10.2), a limit of pre-2012 CPUs rather than a difference in results.
SETTINGS = {
    "as-is": {},
    "1 thread": {
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "TF_NUM_INTRAOP_THREADS": "1",
        "TF_NUM_INTEROP_THREADS": "1",
        "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    },
    "AVX2": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "OPENBLAS_CORETYPE": "Haswell",
        "NPY_DISABLE_CPU_FEATURES": "X86_V4",
        "XLA_FLAGS": "--xla_cpu_max_isa=AVX2",
    },
    "no SIMD dispatch": {
        "ATEN_CPU_CAPABILITY": "default",
        "ONEDNN_MAX_CPU_ISA": "SSE41",
        "OPENBLAS_CORETYPE": "Prescott",
        "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4",
        "XLA_FLAGS": "--xla_cpu_max_isa=AVX",
    },
}
# Where a framework or a column cannot take a switch (`VAR`, or `VAR=value` for that value alone): what
# stands in for it there, and why. A column's entries add to its framework's.
SUBSTITUTES = {
    "tensorflow": {
        "ONEDNN_MAX_CPU_ISA": (
            {"TF_ENABLE_ONEDNN_OPTS": "0"},
            "TensorFlow 2.21 crashes (SIGSEGV, in a bfloat16 batched matmul) when oneDNN is capped below AVX-512 on an "
            "AVX-512 CPU: it picks oneDNN's bfloat16 kernel by the CPU's features, not by the cap. A real AVX2 CPU "
            "takes Eigen's path there; TF_ENABLE_ONEDNN_OPTS=0 takes it for every op",
        )
    },
    "torch-compiled": {
        "ATEN_CPU_CAPABILITY=default": (
            {"ATEN_CPU_CAPABILITY": "avx2"},
            "Inductor (torch 2.13.0) cannot generate CPU code without a vector ISA: with ATEN_CPU_CAPABILITY=default, "
            "as on an x86 CPU without AVX2, its masked tail loads still use at::vec and g++ stops ('at::vec has not "
            "been declared', 52 of 68 tests, measured). torch.compile's CPU backend starts at AVX2, so its kernels "
            "keep that floor while the libraries it calls take the setting's caps",
        )
    },
}


def substitutes(name):
    """The switches column `name` cannot take: {key: (stand-in, why)}, its framework's and its own."""
    framework = modes.split(name)[0]
    return SUBSTITUTES.get(framework, {}) | (SUBSTITUTES.get(name, {}) if name != framework else {})


def environment(name, setting):
    """This process's environment with `setting` on top, as one adapter's run takes it: a switch the
    adapter cannot take (SUBSTITUTES), set here or inherited, becomes its stand-in. XLA_FLAGS add up."""
    env = os.environ | setting
    if "XLA_FLAGS" in setting and os.environ.get("XLA_FLAGS"):
        env["XLA_FLAGS"] = f"{os.environ['XLA_FLAGS']} {setting['XLA_FLAGS']}"
    for key, (stand_in, _) in substitutes(name).items():
        var, _, value = key.partition("=")
        if var in env and (not value or env[var] == value):
            del env[var]
            env |= stand_in
    return env


WATCH = 0.7  # a margin above this anywhere is listed: another CPU could take it past 1
# Under this setting the oracle's answers are recomputed into a cache of their own, then
# compared byte for byte with the ones the as-is runs used: every op, dtype and rounding the spec
# runs, not only the goldens tests/test_deterministic.py regenerates.
ORACLE_RECOMPUTED_UNDER = "no SIMD dispatch"


# Adapters not rerun, each because a measurement showed every setting gives it the same bits (no
# margin moved in any of the four runs; Intel Xeon 2.8 GHz, AVX-512, 2 threads, 2026-11-30).
UNSWITCHED = {
    "reference": "the oracle is the same bytes under every setting: its answers are recomputed under "
    f"{ORACLE_RECOMPUTED_UNDER!r} and compared byte for byte, and tests/test_deterministic.py regenerates the goldens",
    "tfjs": "TensorFlow.js's WebAssembly backend has one code path: no margin moved under any setting (measured)",
    "mlx": "the mlx-cpu wheel's kernels and reference BLAS are fixed when it is built: no margin moved under any "
    "setting (measured)",
}


MODE_FAMILIES = "fused_paths or causal_and_masks or decoder_layers"


def _run(name, setting, directory, python=sys.executable, pytest_args=()):
    """One whole-spec pytest run under `setting`; its report, or None if it left none complete."""
    env = environment(name, setting)
    command = [
        str(python),
        "-m",
        "attention_conformance",
        "run",
        "--adapter",
        name,
        "-q",
        "--reports",
        str(directory),
        *pytest_args,
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    try:
        report = reports.runs(directory).get(name)
    except reports.ReportError:
        report = None
    # Narrowed by pytest arguments, a run is incomplete by design; a test missing from one run shows as
    # an outcome change in compare().
    if done.returncode == 5:
        return None, "no tests selected (pytest exit 5): check the -k or other arguments"
    if report is None or not (report["complete"] or pytest_args) or done.returncode not in (0, 1):
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        return None, f"exit {done.returncode}: " + " / ".join(tail)
    return report, None


def compare(runs):
    """{"tests", "changed": [(id, {setting: outcome})], "watch": [(id, {setting: margin})], "moved": {setting: n}}
    from {setting: report}; "moved" counts the tests whose margin differs from the as-is run's."""
    ids = sorted(set().union(*(r["tests"] for r in runs.values())))  # a test one run lacks is a change too
    changed, watch, moved = [], [], {s: 0 for s in runs if s != "as-is"}
    for test_id in ids:
        outcomes = {s: r["tests"].get(test_id, {}).get("outcome", "missing") for s, r in runs.items()}
        margins = {s: r["tests"].get(test_id, {}).get("margin") for s, r in runs.items()}
        if len(set(outcomes.values())) > 1:
            changed.append((test_id, outcomes))
        if any(m is not None and m > WATCH for m in margins.values()):
            watch.append((test_id, margins))
        for s in moved:
            moved[s] += margins[s] != margins["as-is"]
    return {"tests": len(ids), "changed": changed, "watch": watch, "moved": moved}


def oracle_drift(recomputed, shared):
    """(entries compared, [keys whose arrays differ]) between two oracle caches."""
    compared, differ = 0, []
    for path in sorted(Path(recomputed).glob(f"oracle/*{oracle_cache.SUFFIX}")):
        ours, theirs = oracle_cache.read(path), oracle_cache.read(Path(shared) / "oracle" / path.name)
        if ours is None or theirs is None:
            continue
        compared += 1
        if ours.keys() != theirs.keys() or not all(_same(ours[k], theirs[k]) for k in ours):
            differ.append(path.stem)
    return compared, differ


def _same(ours, theirs):
    """One answer of two caches alike: the same dtype and values, or None in both (a bound the model has none for)."""
    if ours is None or theirs is None:
        return ours is theirs
    return ours.dtype == theirs.dtype and np.array_equal(ours, theirs, equal_nan=True)


def measure(name, python=sys.executable, pytest_args=(), recomputed=None, as_is=None):
    """Every setting's run of one adapter, compared; the runs' machine and switch records kept.
    `recomputed`: the oracle cache where ORACLE_RECOMPUTED_UNDER's run keeps the answers it recomputes; `as_is`:
    a report that stands for the as-is run (already_run.as_is_report)."""
    with tempfile.TemporaryDirectory() as scratch:
        runs, problems, seconds, skipped = {}, [], {}, {}
        for label, setting in SETTINGS.items():
            if label == "as-is" and as_is is not None:
                runs[label], seconds[label] = as_is, "its own run"
                continue
            why = already_run.native_reason(label, setting, substitutes(name))
            if why:
                skipped[label] = why
                continue
            start = time.perf_counter()
            if label == ORACLE_RECOMPUTED_UNDER and recomputed is not None:
                setting = setting | {"ATTENTION_CONFORMANCE_CACHE": str(recomputed)}
            report, problem = _run(name, setting, Path(scratch) / label.replace(" ", "_"), python, pytest_args)
            seconds[label] = round(time.perf_counter() - start, 1)
            if report is None:
                problems.append(f"{label}: {problem}")
                if (
                    label == "as-is"
                ):  # an adapter that does not import, or selects nothing, fails the same way every time
                    break
            else:
                runs[label] = report
    switched = {
        label: {k: v for k, v in environment(name, setting).items() if k in machine.SWITCHES}
        for label, setting in SETTINGS.items()
    }
    result = {
        "adapter": name,
        "problems": problems,
        "seconds": seconds,
        "settings": switched,
        "substitutes": {key: why for key, (_, why) in substitutes(name).items()},
        "native": skipped,
        "pytest_args": list(pytest_args),  # what each rerun selected: its families (publish/costs.py)
        "numerics": {s: r.get("numerics", {}) for s, r in runs.items()},
    }
    if "as-is" in runs:
        result |= compare(runs)
    return result


def _lines(result):
    name = result["adapter"]
    if "skipped" in result:
        return [f"{name}: not rerun: {result['skipped']}"]
    lines = [
        f"{name}: {result.get('tests', 0)} tests; outcome changes: {len(result.get('changed', []))}; "
        f"margins moved from as-is: "
        + ", ".join(f"{s} {n}" for s, n in result.get("moved", {}).items())
        + "; seconds: "
        + ", ".join(f"{s} {t}" for s, t in result.get("seconds", {}).items())
    ]
    lines += [f"  {key} is replaced here: {why}" for key, why in result.get("substitutes", {}).items()]
    lines += [f"  {label}: not rerun: {why}" for label, why in result.get("native", {}).items()]
    lines += [f"  RUN FAILED {p}" for p in result["problems"]]
    lines += [
        f"  OUTCOME CHANGED {t}: " + ", ".join(f"{s} {o}" for s, o in outcomes.items())
        for t, outcomes in result.get("changed", [])
    ]
    lines += [
        f"  margin above {WATCH} {t}: " + ", ".join(f"{s} {m:.3f}" for s, m in margins.items() if m is not None)
        for t, margins in result.get("watch", [])
    ]
    return lines


def main(adapter=None, envs=None, pytest_args=()):
    """One adapter in this environment, or every built-in adapter in its own tox environment."""
    if not adapter and not Path(envs or ".tox").is_dir():
        print(
            f"error: no tox work folder at {envs or '.tox'}: use --adapter NAME for an adapter in this environment, "
            "or --envs DIR for tox's work folder",
            file=sys.stderr,
        )
        return 2
    shared = cache.directory()
    with tempfile.TemporaryDirectory() as scratch:
        recompute = Path(scratch) if shared is not None else None
        if adapter:
            results = [measure(adapter, pytest_args=pytest_args, recomputed=recompute)]
        else:
            results = []
            for name in registry.NAMES:
                python = Path(envs or ".tox") / name / "bin" / "python"
                if name in UNSWITCHED:
                    results.append({"adapter": name, "skipped": UNSWITCHED[name], "problems": []})
                elif not python.exists():
                    results.append(
                        {
                            "adapter": name,
                            "problems": [f"no environment at {python.parent.parent}: run `tox -e {name}` first"],
                        }
                    )
                else:
                    as_is = None if pytest_args else already_run.as_is_report(name, python=python)
                    results.append(measure(name, python, pytest_args, recompute, as_is))
                    # Another mode reruns the families a compiler rewrites (fused kernels, masks, whole decoder
                    # layers): its compiled kernels are picked by the CPU too, at a compile a setting.
                    for column in columns.other_modes(python, name):
                        results.append(measure(column, python, [*pytest_args, "-k", MODE_FAMILIES]))
        compared, differ = oracle_drift(recompute, shared) if recompute is not None else (0, [])
    described = (
        f"{label} ({' '.join(f'{k}={v}' for k, v in setting.items()) or 'no switch'})"
        for label, setting in SETTINGS.items()
    )
    print(f"Portability: each spec rerun under {'; '.join(described)}")
    print(f"on {machine.one_line()}\n")
    for result in results:
        print("\n".join(_lines(result)))
    oracle = {"recomputed_under": ORACLE_RECOMPUTED_UNDER, "compared": compared, "differ": differ}
    print(
        f"oracle: {compared} answers recomputed under {ORACLE_RECOMPUTED_UNDER} and compared with the as-is ones: "
        + (
            f"{len(differ)} DIFFER ({', '.join(d[:12] for d in differ[:5])})"
            if differ
            else "all byte-identical"
            if compared
            else "none to compare (the tests run read stored goldens only)"
        )
        + ("" if shared is not None else " (not compared: ATTENTION_CONFORMANCE_CACHE=off keeps none)")
    )
    writing.whole(
        reports.DEFAULT_DIR / "portability.json",
        (
            json.dumps(
                {
                    "machine": machine.describe(),
                    "settings": SETTINGS,
                    "watch_above": WATCH,
                    "oracle": oracle,
                    "results": results,
                },
                indent=1,
            )
            + "\n"
        ).encode(),
    )
    bad = [r["adapter"] for r in results if r["problems"] or r.get("changed")] + (["the oracle"] if differ else [])
    rerun = [r["adapter"] for r in results if "skipped" not in r]
    skipped = [r["adapter"] for r in results if "skipped" in r]
    verdict = (
        f"FAILED: {', '.join(bad)} (see above)"
        if bad
        else f"ok: the same outcome for every test under every setting ({', '.join(rerun)}"
        + (f"; not rerun: {', '.join(skipped)}" if skipped else "")
        + ")"
    )
    sys.stdout.flush()  # a failing verdict goes to stderr, as every command's problems do, and stays the last line
    print(f"\n{verdict}; details in {reports.DEFAULT_DIR / 'portability.json'}", file=sys.stderr if bad else sys.stdout)
    return 1 if bad else 0
