"""Measuring one framework in its own environment for the benchmark (tools/benchmark.py): the whole
spec's run with the time inside the adapter counted, a bare import, a cold run, the working set.
Each measurement runs in a fresh Python of that environment (`_child`)."""

import contextlib
import dataclasses
import io
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from attention_conformance import dtypes
from attention_conformance.cases import golden, inputs, loader, plan
from attention_conformance.contract import ops, registry
from attention_conformance.publish import speed
from attention_conformance.run import calls, reports, verify
from attention_conformance.tools import peer

MATMUL = (1024, 768, 768)  # GPT-2 small's projection: (T, d_in) @ (d_in, d_out)


def _rss_mib():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_import(name, started):
    """Only the adapter's import, timed from the start of the child's code (`started`): the rest of the
    child's wall time is Python starting and exiting with the framework loaded."""
    registry.load(name)
    print(json.dumps({"s": time.perf_counter() - started}))


def child_bare(name):
    """Memory only: the adapter imported, then one trivial case through the suite (the allocator's baseline)."""
    adapter = registry.load(name)
    row = {"rss_mib": _rss_mib()}
    spec = loader.load()
    first = next(c for c in spec.cases.values() if c.family == "document values")
    verify.verify_all(
        dataclasses.replace(spec, cases={first.id: first}), name, adapter, golden.Goldens(), adapter.DTYPES[:1]
    )
    print(json.dumps(row | {"trivial_rss_mib": _rss_mib()}))


class _PerTest:
    """Wall seconds of each test and the part of them inside the adapter."""

    def __init__(self):
        self.rows = []

    def pytest_runtest_protocol(self, item):
        self.started = (time.perf_counter(), sum(calls.inside_s.values()))
        self.skipped = self.passed = False

    def pytest_runtest_logreport(self, report):
        self.skipped |= report.skipped and not hasattr(report, "wasxfail")  # not applicable: never called
        self.passed |= report.when == "call" and report.passed and not hasattr(report, "wasxfail")

    def pytest_runtest_logfinish(self, nodeid):
        t, inside = self.started
        wall, inside = time.perf_counter() - t, sum(calls.inside_s.values()) - inside
        self.rows.append((nodeid, wall, inside, not self.skipped, self.passed))


def child_whole(name, reports_dir):
    """The whole-spec run as `attention-conformance run` (and so tox) does it, the import timed apart."""
    from attention_conformance.run import launch

    t, cpu = time.perf_counter(), time.process_time()
    registry.load(name)
    import_s, import_cpu_s = time.perf_counter() - t, time.process_time() - cpu
    per_test = _PerTest()
    with contextlib.redirect_stdout(io.StringIO()):
        exit_code = launch.run([name], ["-q", "--reports", reports_dir], plugins=[per_test])
    inside = [
        {"op": op, "dtype": dtype, "s": s, "calls": calls.inside_calls[op, dtype]}
        for (op, dtype), s in calls.inside_s.most_common()
    ]
    slowest = sorted(per_test.rows, key=lambda r: r[2] - r[1])[:5]
    print(
        json.dumps(
            {
                "import_s": import_s,
                "import_cpu_s": import_cpu_s,
                "inside_cpu_s": calls.inside_cpu_s[0],
                "exit": exit_code,
                "tests": len(per_test.rows),
                "tests_run": sum(ran for *_, ran in per_test.rows),
                "inside_s": sum(calls.inside_s.values()),
                "inside": inside,
                "rss_mib": _rss_mib(),
                "in_tests_s": sum(wall for _, wall, *_ in per_test.rows),
                # the tests the peer (tools/peer.py) repeats: the passed ones, their time less the adapter's
                "passed": sum(passed for *_, passed in per_test.rows),
                "checking_passed_s": sum(w - i for _, w, i, _, passed in per_test.rows if passed),
                "most_overhead": [{"test": n, "s": w - i} for n, w, i, *_ in slowest],
            }
        )
    )


def _child(function, *args, env=None):
    """(wall seconds, the JSON it printed) of measure.<function>(*args) in a fresh Python of this environment."""
    code = f"from attention_conformance.tools import measure; measure.{function}(*{args!r})"
    if function == "child_import":  # the clock starts before the suite is imported: its import is ours
        code = f"import time; started = time.perf_counter(); {code[:-1]}, started)"
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    if done.returncode:
        raise RuntimeError(f"measure.{function}{args} failed:\n{done.stderr[-3000:]}")
    return wall, json.loads(done.stdout.strip().splitlines()[-1])


# --- in the framework's environment: the row for one framework ----------------------------------------


def _shape(value, goldens):
    if isinstance(value, str) and "#" in value:
        return goldens.tensor(value).shape
    if isinstance(value, dict):
        return tuple(value["shape"])
    if isinstance(value, list):
        import numpy as np

        return np.shape(value)
    return None


def working_set(case, goldens):
    """Bytes the textbook computation of a case holds at once, in float64, from its shapes: the inputs,
    then for attention over x the projections, scores and weights, context and output; for scores
    over q and k those and the output; otherwise the inputs and an output of their size."""
    shapes = {k: s for k, v in case.inputs.items() if (s := _shape(v, goldens)) is not None}
    inputs = sum(math.prod(s) for s in shapes.values())
    if "x" in shapes and "w_query" in shapes:
        x = shapes["x"]
        rows, tokens, width = math.prod(x[:-1]), x[-2] if len(x) > 1 else 1, shapes["w_query"][-1]
        heads = case.inputs.get("num_heads", 1)
        batch = math.prod(x[:-2]) if len(x) > 2 else 1
        out = shapes["w_out"][-1] if "w_out" in shapes else width
        queries = tokens - case.inputs.get("start", 0)  # decoding's queries start..T-1: their rows of scores only
        return 8 * (inputs + 3 * rows * width + 2 * batch * heads * queries * tokens + rows * width + rows * out)
    if "q" in shapes and "k" in shapes:
        scores = math.prod(shapes["q"][:-1]) * shapes["k"][-2]
        return 8 * (inputs + 2 * scores + math.prod(shapes["q"]))
    return 8 * 2 * inputs


def _timed(fn, kwargs, forget=lambda: None):
    fn(**kwargs)  # warm-up: compilation, allocator
    times = []
    for _ in range(3):
        forget()  # the reference remembers answers: each timed call computes
        t = time.perf_counter()
        fn(**kwargs)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _in_process(name):
    """The framework's own speed on fixed work: its matmul against NumPy's, half precision against
    float32, and GPT-2-small-shaped attention as T grows."""
    import numpy as np

    adapter, spec, goldens = registry.load(name), loader.load(), golden.Goldens()
    forget = getattr(adapter, "_REMEMBERED", {}).clear
    rng = np.random.default_rng(0)
    T, D, H = MATMUL
    x, w = rng.uniform(-1, 1, (T, D)).astype(np.float32), rng.uniform(-0.05, 0.05, (D, H)).astype(np.float32)
    numpy_s = _timed(lambda x, w: x @ w, {"x": x, "w": w})

    def attempt(op, kwargs):
        """Seconds, or None where the adapter cannot (a stub declared not applicable by case, parameter or dtype)."""
        try:
            return _timed(getattr(adapter, op), kwargs, forget)
        except Exception:  # noqa: BLE001 - whatever it raises, this figure is not measured
            return None

    matmul = {
        dtype: attempt("project", {"x": x.astype(dtypes.np_dtype(dtype)), "w": w.astype(dtypes.np_dtype(dtype))})
        for dtype in adapter.DTYPES
    }
    matmul = {dtype: s for dtype, s in matmul.items() if s is not None}

    def call(case_id, op, tokens):
        kwargs = inputs.resolve_all(spec.cases[case_id], "float32", goldens)
        kwargs["x"] = kwargs["x"][..., :tokens, :]  # the first T tokens, at GPT-2 small's width and heads
        return attempt(op, {k: v for k, v in kwargs.items() if k in ops.CONTRACT[op]})

    scaling = [
        {
            "T": t,
            "textbook_s": call("gpt2_small_heads_causal", "multi_head_attention", t),
            "fused_s": call("fused_gpt2_small_heads_causal", "fused_attention", t),
        }
        for t in speed.SCALING_T
    ]
    runs = {t.case.id for t in plan.tests(spec, {name: adapter}) if not t.not_applicable}
    largest = max((c for c in spec.cases.values() if c.id in runs), key=lambda c: working_set(c, goldens))
    return {
        "version": adapter.version() if hasattr(adapter, "version") else "?",
        "numpy_matmul_s": numpy_s,
        "matmul_s": matmul,
        "scaling": scaling,
        "working_set_case": largest.id,
        "working_set_mib": working_set(largest, goldens) / 2**20,
    }


def measure(name, scratch=None):
    """One framework's row: floor, overhead, cold run, memory, where its time goes."""
    with contextlib.ExitStack() as stack:
        scratch = scratch or stack.enter_context(tempfile.TemporaryDirectory())
        empty = stack.enter_context(tempfile.TemporaryDirectory())
        alone_wall, alone = _child("child_import", name)
        _, bare = _child("child_bare", name)
        whole_wall, whole = _child("child_whole", name, str(scratch))
        cache = Path(empty) / "cache"  # the XLA cache too, wherever the user keeps theirs
        cold_wall, cold = _child(
            "child_whole",
            name,
            str(Path(empty) / "reports"),
            env=os.environ
            | {"ATTENTION_CONFORMANCE_CACHE": str(cache), "JAX_COMPILATION_CACHE_DIR": str(cache / "xla")},
        )
        if whole["exit"] not in (0, 1):
            raise RuntimeError(
                f"{name}: the whole-spec run stopped with pytest exit {whole['exit']}: nothing to measure"
            )
        # The peer repeats what the warm run passed: its report is in the scratch folder, gone when this block ends.
        peer_folder = stack.enter_context(tempfile.TemporaryDirectory())
        peer_tests = peer.write(name, Path(scratch) / reports.file_name(name), peer_folder)
        peer_wall, peer_times, peer_exit = peer.run(peer_folder)
    lifecycle = max(alone_wall - alone["s"], 0.0)  # a Python holding the framework starts and exits
    floor = whole["import_s"] + whole["inside_s"] + lifecycle
    overhead = whole_wall - floor
    baseline = max(bare["trivial_rss_mib"] - bare["rss_mib"], 0.0)
    row = {
        "adapter": name,
        "tests": whole["tests"],
        "tests_run": whole["tests_run"],
        "exit": whole["exit"],
        "cold_exit": cold["exit"],
        "whole_s": whole_wall,
        "import_s": whole["import_s"],
        "inside_s": whole["inside_s"],
        "start_and_exit_s": lifecycle,
        "floor_s": floor,
        "floor_cpu_s": whole["import_cpu_s"] + whole["inside_cpu_s"] + lifecycle,
        "overhead_s": overhead,
        "overhead_share": overhead / whole_wall,
        # per test that ran: a not-applicable test costs next to nothing and would dilute the figure
        "overhead_ms_per_test": 1000 * overhead / max(whole["tests_run"], 1),
        "whole_over_floor": whole_wall / floor,
        # A framework's own first-run work (XLA compiling, ONNX exporting into the cache) is its floor, as
        # warm; what the target weighs is the suite's: the oracle computing its answers.
        "cold_s": cold_wall,
        "cold_framework_extra_s": max(cold["inside_s"] - whole["inside_s"], 0.0),
        "bare_rss_mib": bare["rss_mib"],
        "peak_rss_mib": whole["rss_mib"],
        "over_bare_mib": whole["rss_mib"] - bare["rss_mib"],
        "allocator_baseline_mib": baseline,
        "inside": whole["inside"],
        "most_overhead": whole["most_overhead"],
        # where the overhead is: in the tests (the oracle's cache, comparisons) or around them (start, collection, exit)
        "overhead_in_tests_s": whole["in_tests_s"] - whole["inside_s"],
        # the hand-written peer (tools/peer.py): the same calls and outputs, assert_allclose against stored answers
        "peer_tests": peer_tests,
        "peer_failed": peer_times["failed"],
        "peer_exit": peer_exit,
        "peer_s": peer_wall,
        "whole_over_peer": whole_wall / peer_wall,
        "checking_ms_per_test": 1000 * whole["checking_passed_s"] / max(whole["passed"], 1),
        "peer_checking_ms_per_test": 1000 * (peer_times["in_tests_s"] - peer_times["inside_s"]) / max(peer_tests, 1),
    } | _in_process(name)
    # A peer with no test, or one pytest stopped (exit past 1), has no checking work to weigh against.
    peered = peer_tests and peer_exit in (0, 1) and row["peer_checking_ms_per_test"] > 0
    row["checking_over_peer"] = row["checking_ms_per_test"] / row["peer_checking_ms_per_test"] if peered else None
    # A cold run that stopped early would look fast: not measured.
    row["cold_over_warm"] = (cold_wall - row["cold_framework_extra_s"]) / whole_wall if cold["exit"] in (0, 1) else None
    row["memory_allowed_mib"] = 2 * row["working_set_mib"] + baseline
    row["memory_over_allowed"] = row["over_bare_mib"] / row["memory_allowed_mib"]
    row["ratios"] = {key: row[key] / target for key, target in speed.TARGETS.items() if row.get(key) is not None}
    return row


# Where each framework keeps what it compiled between processes: emptied for a mode's first run.
_COMPILE_CACHES = ("TORCHINDUCTOR_CACHE_DIR", "JAX_COMPILATION_CACHE_DIR", "TMPDIR")  # MLX's: $TMPDIR/mlx


def measure_mode(column):
    """A mode's row (another mode of an adapter, attention_conformance/modes.py): its warm whole-spec run against
    its floor, as `measure`'s, and its compile time: how much longer the framework's own work took in a first run
    with its compile caches empty than warm (the oracle's cache stays warm: it is the same for every mode)."""
    with tempfile.TemporaryDirectory() as empty, tempfile.TemporaryDirectory() as scratch:
        fresh = {name: str(Path(empty) / name) for name in _COMPILE_CACHES}
        for folder in fresh.values():
            Path(folder).mkdir()
        first_wall, first = _child("child_whole", column, str(Path(scratch) / "first"), env=os.environ | fresh)
        alone_wall, alone = _child("child_import", column)
        # Warm: the caches the first run filled, whatever the user's own hold.
        whole_wall, whole = _child("child_whole", column, str(Path(scratch) / "warm"), env=os.environ | fresh)
    floor = whole["import_s"] + whole["inside_s"] + max(alone_wall - alone["s"], 0.0)
    return {
        "adapter": column,
        "tests": whole["tests"],
        "tests_run": whole["tests_run"],
        "exit": whole["exit"],
        "whole_s": whole_wall,
        "inside_s": whole["inside_s"],
        "floor_s": floor,
        "whole_over_floor": whole_wall / floor,
        "first_s": first_wall,
        "compile_s": max(first["inside_s"] - whole["inside_s"], 0.0),
    }


# --- the main job, from tox ---------------------------------------------------------------------------
