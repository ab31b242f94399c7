"""docs/speed.md's tables and findings (attention_conformance/publish/speed.py) from a small hand-made benchmark
document: what is shown when a figure was not measured (no main job, a cold run that stopped, a path a
framework lacks), the memory target, and which of a framework's ops its findings keep.
tests/tools/test_benchmark.py checks the overhead targets, the matmul notes and the tables' format."""

from attention_conformance.publish import speed

MACHINE = {"host": "h", "cpu": "Some CPU", "isa": "AVX2", "half": [], "threads": 2, "switches": {}}


def _row(name, **figures):
    row = {
        "adapter": name,
        "tests": 10,
        "tests_run": 8,
        "whole_s": 2.0,
        "import_s": 0.5,
        "inside_s": 1.0,
        "start_and_exit_s": 0.25,
        "floor_s": 10.0,
        "overhead_s": 0.1,
        "overhead_share": 0.05,
        "overhead_ms_per_test": 1.0,
        "cold_s": 2.5,
        "cold_framework_extra_s": 0.0,
        "cold_over_warm": 1.25,
        "over_bare_mib": 100.0,
        "working_set_mib": 40.0,
        "working_set_case": "gpt2",
        "allocator_baseline_mib": 20.0,
        "memory_allowed_mib": 100.0,
        "memory_over_allowed": 1.0,
        "numpy_matmul_s": 0.01,
        "matmul_s": {"float32": 0.02},
        "inside": [{"op": "attention", "dtype": "float32", "s": 1.0, "calls": 4}],
        "scaling": [{"T": t, "textbook_s": 0.001 * t, "fused_s": None} for t in speed.SCALING_T],
    } | figures
    row["ratios"] = {key: row[key] / target for key, target in speed.TARGETS.items() if row.get(key) is not None}
    return row


def _tables(text):
    """{first header cell: [{header: cell}]} for each Markdown table of `text`."""
    found, header = {}, None
    for line in text.splitlines():
        if line.startswith("|---"):
            continue
        if not line.startswith("| "):
            header = None
        elif header is None:
            header = [c.strip() for c in line.strip("|").split("|")]
            found[header[0] + " " + header[1]] = []
        else:
            found[header[0] + " " + header[1]].append(
                dict(zip(header, (c.strip() for c in line.strip("|").split("|"))))
            )
    return found


def test_a_figure_not_measured_is_a_dash_and_said_in_the_targets_line_never_a_hold():
    text = speed.tables({"machine": MACHINE, "date": "2026-01-02", "frameworks": [_row("torch", cold_over_warm=None)]})
    assert "the warm run with the oracle cache as found" in text.splitlines()[0]
    assert "Main job, `tox -m conformance -p auto`, warm: not measured here (`tox -e benchmark` measures it)" in text
    (torch,) = _tables(text)["framework tests run (of all)"]
    assert torch["cold/warm, less that work (<= 2)"] == "-"
    targets = next(line for line in text.splitlines() if line.startswith("Targets:"))
    assert "cold <= 2x warm: not measured for torch" in targets
    assert "main job <= 1.3x its floor: not measured" in targets
    assert "memory <= 2x working set + baseline: holds" in targets, "used / allowed of exactly 1 holds"


def test_a_main_job_whose_tox_failed_is_not_measured():
    job = {"s": 9.0, "floor_s": 5.0, "frameworks_floor_cpu_s": 8.0, "cores": 2, "tox_fixed_s": 1.0}
    job |= {"exit": 2, "tox_fixed_exit": 0, "main_job_over_floor": None, "ratios": {}}
    text = speed.tables({"machine": MACHINE, "date": "2026-01-02", "main_job": job, "frameworks": [_row("torch")]})
    assert "tox failed (exit 2, 0 with empty commands): not measured" in text
    assert "main job <= 1.3x its floor: not measured for the main job" in text


def test_memory_over_its_allowance_is_marked_and_a_path_never_measured_has_no_row():
    text = speed.tables(
        {"machine": MACHINE, "date": "2026-01-02", "frameworks": [_row("jax", memory_over_allowed=1.2)]}
    )
    found = _tables(text)
    (memory,) = found["framework over bare import MiB"]
    assert memory["used/allowed (<= 1)"] == "1.20 MISS"
    assert memory["largest working set MiB"] == "40 (gpt2)"
    assert "memory <= 2x working set + baseline: missed by jax" in text
    scaling = found["framework path"]
    assert [(r["framework"], r["path"]) for r in scaling] == [("jax", "textbook")], "no fused figure: no fused row"
    assert scaling[0]["T=1024"] == "1.024"


def test_findings_keep_the_largest_ops_with_their_share_of_the_floor_and_the_known_reason():
    inside = [
        {"op": "fused_attention", "dtype": "float16", "s": 3.0, "calls": 100},
        {"op": "project", "dtype": "float32", "s": 1.0, "calls": 10},
        {"op": "softmax", "dtype": "float32", "s": 0.5, "calls": 10},
    ]
    found = speed.findings([_row("jax", inside=inside)], MACHINE)
    assert [f["op"] for f in found] == ["fused_attention", "project"], "the two largest, in the order measured"
    assert found[0]["share_of_floor"] == 0.3
    # Neither matmul is 4x slower (float16 is not measured, float32 is 2x NumPy's): the reason alone, per call.
    assert found[0]["note"] == f"30 ms a call: {speed.REASONS['jax', 'float16']}"
    assert found[1]["note"] == f"100 ms a call: {speed.REASONS['jax', None]}"
    assert [f["op"] for f in speed.findings([_row("jax", inside=inside)], MACHINE, top=1)] == ["fused_attention"]


def test_another_modes_row_shows_its_run_against_its_floor_and_its_compile_time_and_none_without_modes():
    mode = {"adapter": "torch-compiled", "tests": 10, "tests_run": 8, "whole_s": 30.0, "floor_s": 24.0}
    mode |= {"whole_over_floor": 1.25, "first_s": 200.0, "compile_s": 150.5}
    doc = {"machine": MACHINE, "date": "2026-01-02", "frameworks": [_row("torch")]}
    assert "Other modes" not in speed.tables(doc)
    (row,) = _tables(speed.tables(doc | {"modes": [mode]}))["column tests run (of all)"]
    assert row == {
        "column": "torch-compiled",
        "tests run (of all)": "8 (10)",
        "whole spec s": "30.00",
        "floor s": "24.00",
        "whole/floor": "1.25x",
        "first run s": "200.00",
        "compile s": "150.50",
    }


def test_the_peer_table_shows_checking_work_against_the_hand_written_peer_and_marks_a_miss():
    peered = {
        "peer_tests": 6,
        "peer_failed": 0,
        "peer_s": 1.6,
        "whole_over_peer": 1.25,
        "checking_ms_per_test": 3.0,
        "peer_checking_ms_per_test": 1.5,
        "checking_over_peer": 2.0,
    }
    doc = {"machine": MACHINE, "date": "d", "frameworks": [_row("slow", **peered), _row("unpeered")]}
    text = speed.tables(doc)
    (row,) = _tables(text)["framework peer's tests (failed)"]
    assert row == {
        "framework": "slow",
        "peer's tests (failed)": "6 (0)",
        "suite's whole spec s": "2.00",
        "peer's whole file s": "1.60",
        "suite/peer, whole": "1.25",
        "suite's checking ms/test": "3.00",
        "peer's checking ms/test": "1.50",
        "suite/peer, checking (<= 1)": "2.00 MISS",
    }
    assert "checking work per test <= the hand-written peer's: missed by slow; not measured for unpeered" in text


def test_the_main_jobs_first_run_is_set_beside_its_warm_one():
    job = {"s": 50.0, "floor_s": 40.0, "frameworks_floor_cpu_s": 70.0, "cores": 2, "tox_fixed_s": 4.0, "exit": 0}
    job |= {"tox_fixed_exit": 0, "main_job_over_floor": 1.25, "cold_s": 125.0, "cold_exit": 0, "cold_over_warm": 2.5}
    job["ratios"] = {"main_job_over_floor": 1.25 / 1.3, "cold_over_warm": 2.5 / 2.0}
    text = speed.tables({"machine": MACHINE, "date": "2026-01-02", "main_job": job, "frameworks": [_row("torch")]})
    line = next(line for line in text.splitlines() if line.startswith("Main job"))
    assert line.endswith(
        "1.25x (<= 1.3); cold, the oracle cache empty (the environments and compile caches as they "
        "are): 125.0 s, 2.50x warm (<= 2) MISS"
    ), line
    failed = speed.tables(
        {
            "machine": MACHINE,
            "date": "2026-01-02",
            "frameworks": [_row("torch")],
            "main_job": job | {"cold_exit": 1, "cold_over_warm": None},
        }
    )
    assert (
        "cold, the oracle cache empty (the environments and compile caches as they are): tox failed (exit 1)" in failed
    )
