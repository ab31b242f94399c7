"""The benchmark's memory allowance from a case's shapes (attention_conformance/tools/measure.py, working_set):
the float64 numbers the textbook computation holds at once, worked out by hand here for each kind of case.
Nothing is timed or run in a child; tests/tools/test_benchmark.py checks GPT-2 small, the largest case."""

import dataclasses

import pytest

from attention_conformance.cases import golden, loader
from attention_conformance.tools import measure


@pytest.fixture(scope="module")
def spec():
    return loader.load()


@pytest.fixture(scope="module")
def goldens():
    return golden.Goldens()


def test_a_value_has_the_shape_of_what_it_names_and_a_scalar_none(goldens):
    assert measure._shape("doc000_seed123.json#x", goldens) == (6, 3)
    assert measure._shape("doc000_seed123.json#x[2]", goldens) == (3,), "one row of the golden tensor"
    assert measure._shape({"uniform": [-1, 1], "shape": [1, 1024, 768], "seed": 7}, goldens) == (1, 1024, 768)
    assert measure._shape([[0.4433], [1.1419]], goldens) == (2, 1)
    assert measure._shape(12, goldens) is None and measure._shape("mha", goldens) is None


def test_attention_over_x_holds_its_inputs_projections_scores_weights_context_and_output(spec, goldens):
    # x (6, 3) and three 3 x 2 weights: 36 inputs; q, k, v 36; scores and weights 72; context 12; output 12.
    assert measure.working_set(spec.cases["sat"], goldens) == 8 * (36 + 36 + 72 + 12 + 12)


def test_batches_and_heads_multiply_the_scores_and_an_output_projection_sets_the_output(spec, goldens):
    def random(*shape):
        return {"uniform": [-1, 1], "shape": list(shape), "seed": 0}

    shapes = {"x": random(2, 5, 4), "w_query": random(4, 6), "w_key": random(4, 6), "w_value": random(4, 6)}
    case = dataclasses.replace(spec.cases["sat"], inputs=shapes | {"w_out": random(6, 7), "num_heads": 3})
    # inputs 40 + 72 + 42; q, k, v 3 x 10 x 6; 2 batches x 3 heads of 5 x 5 scores and weights; context 60; output 70.
    assert measure.working_set(case, goldens) == 8 * (154 + 180 + 2 * 2 * 3 * 25 + 60 + 70)


def test_scores_over_q_and_k_hold_the_scores_twice_and_an_output_of_qs_size(spec, goldens):
    # q and k (5, 4): 40 inputs; 5 x 5 scores, twice; an output of 20.
    assert measure.working_set(spec.cases["row_transposed_matmul_binary"], goldens) == 8 * (40 + 50 + 20)


def test_any_other_case_holds_its_inputs_and_an_output_of_their_size(spec, goldens):
    # x [0.43, 1.4343] and w [[0.4433], [1.1419]]: 4 numbers in, 4 out.
    assert measure.working_set(spec.cases["cat_sat_hand_check"], goldens) == 8 * 2 * 4


def test_a_modes_compile_time_is_its_first_runs_extra_work_with_the_compile_caches_emptied(monkeypatch):
    runs = []

    def child(function, name, *args, env=None):
        runs.append((function, name, env and {k: env[k] for k in measure._COMPILE_CACHES}))
        if function == "child_import":
            return 3.0, {"s": 2.0}
        first = not any(r[0] == "child_whole" for r in runs[:-1])
        return (40.0 if first else 12.0), {"tests": 9, "tests_run": 7, "exit": 0, "import_s": 2.0} | {
            "inside_s": 35.0 if first else 8.0
        }

    monkeypatch.setattr(measure, "_child", child)
    row = measure.measure_mode("torch-compiled")
    assert [r[:2] for r in runs] == [("child_whole", "torch-compiled"), ("child_import", "torch-compiled")] + [
        ("child_whole", "torch-compiled")
    ]
    assert all(folder.endswith(name) for name, folder in runs[0][2].items())  # every cache a fresh folder
    assert runs[2][2] == runs[0][2]  # warm: the caches the first run filled
    assert row["compile_s"] == 27.0 and row["floor_s"] == 2.0 + 8.0 + 1.0 and row["whole_over_floor"] == 12.0 / 11.0


def test_the_peer_reads_the_warm_runs_report_before_its_scratch_folder_goes(monkeypatch):
    """An outsider's `benchmark --adapter X` without --scratch lost every figure: the peer looked for the warm run's
    report after its temporary folder was gone."""
    from pathlib import Path

    from attention_conformance.tools import peer

    whole = {"tests": 9, "tests_run": 7, "exit": 0, "import_s": 1.0, "import_cpu_s": 1.0, "inside_s": 2.0}
    whole |= {"inside_cpu_s": 2.0, "rss_mib": 10.0, "inside": [], "most_overhead": [], "in_tests_s": 3.0}
    whole |= {"passed": 6, "checking_passed_s": 0.6}

    def child(function, name, *args, env=None):
        if function == "child_import":
            return 2.0, {"s": 1.0}
        if function == "child_bare":
            return 1.0, {"rss_mib": 5.0, "trivial_rss_mib": 6.0}
        (Path(args[0]) / f"{name}.json").parent.mkdir(parents=True, exist_ok=True)
        (Path(args[0]) / f"{name}.json").write_text("{}")  # the report the run writes
        return 5.0, whole

    read = []
    monkeypatch.setattr(measure, "_child", child)
    monkeypatch.setattr(peer, "write", lambda name, report, folder: read.append(Path(report).read_text()) or 6)
    monkeypatch.setattr(peer, "run", lambda folder: (4.0, {"inside_s": 2.0, "in_tests_s": 2.3, "failed": 0}, 0))
    monkeypatch.setattr(measure, "_in_process", lambda name: {"working_set_mib": 100.0})
    row = measure.measure("torch")  # no scratch folder given: a temporary one
    assert read == ["{}"] and row["peer_tests"] == 6
    assert row["checking_over_peer"] == pytest.approx(2.0)  # 0.1 s a test against the peer's (2.3 - 2.0) / 6
