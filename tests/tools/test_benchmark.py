"""The benchmark's arithmetic and the generated tables of docs/speed.md, without a framework or a clock:
what the figures mean is tested here; the figures themselves come from `tox -e benchmark`."""

import copy
import dataclasses
import re
from pathlib import Path

import pytest

from attention_conformance.cases import golden, loader
from attention_conformance.contract import registry
from attention_conformance.publish import speed, tables
from attention_conformance.run import calls, verify
from attention_conformance.tools import benchmark, measure

ROOT = Path(__file__).resolve().parent.parent.parent  # the checkout: its docs/speed.md


def _row(name, **figures):
    row = {
        "adapter": name,
        "tests": 507,
        "tests_run": 500,
        "whole_s": 10.0,
        "import_s": 1.0,
        "inside_s": 7.0,
        "start_and_exit_s": 0.5,
        "floor_s": 8.5,
        "overhead_s": 1.5,
        "overhead_share": 0.15,
        "overhead_ms_per_test": 3.0,
        "cold_s": 14.0,
        "cold_framework_extra_s": 0.0,
        "cold_over_warm": 1.4,
        "over_bare_mib": 300.0,
        "working_set_mib": 246.0,
        "working_set_case": "gpt2",
        "allocator_baseline_mib": 10.0,
        "memory_allowed_mib": 502.0,
        "memory_over_allowed": 0.6,
        "numpy_matmul_s": 0.005,
        "matmul_s": {"float32": 0.01, "float16": 0.7},
        "inside": [
            {"op": "multi_head_attention", "dtype": "float16", "s": 4.0, "calls": 4},
            {"op": "sgd_step", "dtype": "float32", "s": 2.0, "calls": 2},
        ],
        "scaling": [{"T": t, "textbook_s": 0.1, "fused_s": None} for t in speed.SCALING_T],
    } | figures
    row["ratios"] = {key: row[key] / target for key, target in speed.TARGETS.items() if key in row}
    return row


def _doc(rows):
    machine = {"host": "h", "cpu": "Some CPU", "isa": "AVX2", "half": [], "threads": 2, "switches": {}}
    job = {
        "s": 60.0,
        "floor_s": 40.0,
        "frameworks_floor_cpu_s": 70.0,
        "cores": 2,
        "tox_fixed_s": 5.0,
        "main_job_over_floor": 1.5,
        "ratios": {"main_job_over_floor": 1.5 / 1.3},
    }
    return {"machine": machine, "date": "2026-11-30", "main_job": job, "frameworks": rows}


def test_a_figure_over_its_target_is_marked_and_named_in_the_targets_line():
    text = speed.tables(_doc([_row("torch"), _row("jax", overhead_ms_per_test=30.0, overhead_share=0.5)]))
    jax = next(line for line in text.splitlines() if line.startswith("| jax | 500 (507)"))
    assert "50.0 MISS" in jax and "30.0 MISS" in jax
    torch = next(line for line in text.splitlines() if line.startswith("| torch | 500 (507)"))
    assert "MISS" not in torch.split("|")[10], "3.0 ms a test is the target itself: it holds"
    targets = next(line for line in text.splitlines() if line.startswith("Targets:"))
    assert "overhead <= 10% of the run: missed by torch, jax" in targets
    assert "cold <= 2x warm: holds" in targets and "main job <= 1.3x its floor: missed by the main job" in targets


def test_the_main_jobs_floor_is_the_work_over_the_cores_or_the_longest_environment():
    assert benchmark.job_floor([10.0] * 4, [10.0] * 4, 2, 5.0) == 25.0
    assert benchmark.job_floor([20.0] * 4, [10.0] * 4, 2, 5.0) == 45.0, "two threads busy for 10 s are 20 s of work"
    assert benchmark.job_floor([30.0, 2.0, 2.0], [30.0, 2.0, 2.0], 2, 5.0) == 35.0, (
        "one long environment: no schedule beats it"
    )


def test_findings_say_what_was_measured_about_the_frameworks_time():
    rows = [
        _row("torch"),
        _row(
            "mlx",
            matmul_s={"float32": 0.27},
            inside=[{"op": "attention_module", "dtype": "float32", "s": 5.0, "calls": 10}],
        ),
    ]
    found = {(f["framework"], f["op"], f["dtype"]): f["note"] for f in speed.findings(rows, {"half": []})}
    assert (
        "float16 matmul takes 70x its float32's on this CPU (no native half precision)"
        in found["torch", "multi_head_attention", "float16"]
    )
    assert found["torch", "sgd_step", "float32"] == "the framework's own compute"
    assert (
        "float32 matmul takes 54x NumPy's: the mlx-cpu wheel for Linux links the reference (netlib) BLAS"
        in found["mlx", "attention_module", "float32"]
    )


def test_the_largest_working_set_is_gpt2_small_from_its_shapes():
    spec, goldens = loader.load(), golden.Goldens()
    # x (1, 1024, 768) and four 768 x 768 weights; q, k, v; 12 heads of 1024 x 1024 scores and weights;
    # context and output: 32,243,712 float64 numbers.
    assert measure.working_set(spec.cases["gpt2_small_heads_causal"], goldens) == 8 * 32_243_712
    largest = max(spec.cases.values(), key=lambda c: measure.working_set(c, goldens))
    assert "gpt2" in largest.id


def test_time_inside_the_adapter_counts_its_calls_and_never_the_oracles(monkeypatch):
    monkeypatch.setenv("ATTENTION_CONFORMANCE_CACHE", "off")  # the oracle computes: its calls must not count
    spec = loader.load()
    case = spec.cases["sat"]
    before = copy.copy(calls.inside_calls)
    calls.forget()
    results = verify.verify_all(
        dataclasses.replace(spec, cases={case.id: case}),
        "reference",
        registry.load("reference"),
        golden.Goldens(),
        ["float64"],
    )
    assert results and all(outcome == "passed" for outcome, _ in results.values())
    counted = calls.inside_calls - before
    assert counted == {(case.op, "float64"): 1}, counted


def _shape_of(text):
    """Each table as (header cells, cells a row), and the leading words of each sentence line."""
    tables, prose, header = [], [], None
    for line in text.splitlines():
        if line.startswith("|---"):
            continue
        if line.startswith("| "):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if header is None:
                header = tuple(cells)
                tables.append(header)
            else:
                assert len(cells) == len(header), (
                    f"a row of the {header[0]!r} table has {len(cells)} cells, not {len(header)}: {line}"
                )
        else:
            header = None
            if line:
                prose.append(" ".join(line.split()[:2]))
    return tables, prose


def test_the_speed_pages_tables_are_in_the_format_the_benchmark_writes():
    """Regenerate with `attention-conformance publish` after `tox -e benchmark` (tests/publish/test_docs.py:
    not stale)."""
    mode = {"adapter": "torch-compiled", "tests": 507, "tests_run": 500, "whole_s": 20.0, "floor_s": 18.0}
    mode |= {"whole_over_floor": 20.0 / 18.0, "first_s": 200.0, "compile_s": 180.0}
    peer = {"peer_tests": 490, "peer_failed": 3, "peer_s": 6.0, "whole_over_peer": 1.1, "checking_ms_per_test": 2.0}
    peer |= {"peer_checking_ms_per_test": 2.5, "checking_over_peer": 0.8}
    written = _shape_of(speed.tables(_doc([_row("torch", **peer)]) | {"modes": [mode]}))
    block = tables.block("benchmark", ROOT)
    assert _shape_of(block) == written
    assert re.match(r"Measured on .+, \d+ threads.*, \d{4}-\d\d-\d\d, caches warm", block)


def test_the_benchmark_refuses_in_one_line_and_writes_nothing_it_did_not_measure(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert benchmark.main(envs=tmp_path / "no-tox-here") == 1
    assert "no framework measured" in capsys.readouterr().err
    assert not (tmp_path / "reports" / "benchmark.json").exists(), "an empty report would say every target holds"
    with pytest.raises(SystemExit, match=r"^error: adapter 'no_such_adapter_module' was requested but does not import"):
        benchmark.main(adapter="no_such_adapter_module")
    (tmp_path / "reports").mkdir()
    for text, said in (
        ("{not json", "is not a report"),
        ('{"tests": 3}', "measured no framework"),
        ('{"frameworks": [{"adapter": "x"}]}', "is not a report"),
    ):
        (tmp_path / "reports" / "benchmark.json").write_text(text)
        with pytest.raises(SystemExit, match=said):
            tables.benchmark_data(tmp_path / "reports")


def test_the_cold_main_job_runs_on_the_compile_caches_with_the_oracle_cache_empty(tmp_path, monkeypatch):
    for part in ("oracle", "xla", "onnx-export"):
        (tmp_path / "cache" / part).mkdir(parents=True)
        (tmp_path / "cache" / part / "entry").write_text(part)
    monkeypatch.setenv("ATTENTION_CONFORMANCE_CACHE", str(tmp_path / "cache"))
    seen = {}

    def tox(ini, workdir, *extra, cache_folder=None):
        seen.update({p.name: p.joinpath("entry").read_text() for p in Path(cache_folder).iterdir()})
        return 1.0, 0

    monkeypatch.setattr(benchmark, "_tox", tox)
    assert benchmark._cold("tox.ini", ".tox") == (1.0, 0)
    assert seen == {"xla": "xla", "onnx-export": "onnx-export"}
    assert (tmp_path / "cache" / "oracle" / "entry").exists(), "the user's own cache is left as it was"
