"""What `explain` gives a program (issue 74: a user comparing the suite's allowance with flash-attention's rule could
not read it): --json, each stage's worst element, its error and its allowance; --allowance, the allowance itself,
elementwise. And a result the declared dtype cannot hold is refused with how to pass it."""

import json

import numpy as np
import pytest
from explained import float32_stages, qkv_arrays

from attention_conformance import cli
from attention_conformance.tools.examples import _attention
from attention_conformance.tools.explain import problem, record


@pytest.fixture
def saved(tmp_path):
    q, k, v = qkv_arrays()
    out = _attention(q, k, v, "float32")
    out[1, 2, 4, 5] += 0.25
    np.savez(tmp_path / "mine.npz", q=q, k=k, v=v, out=out)
    return tmp_path


def test_json_says_the_worst_element_its_error_and_its_allowance_and_the_allowance_file_holds_it(saved):
    code = cli.main(
        ["explain", str(saved / "mine.npz"), "--json", str(saved / "v.json"), "--allowance", str(saved / "a.npz")]
    )
    assert code == 1
    record = json.loads((saved / "v.json").read_text())
    assert record["verdict"] == "beyond" and record["dtype"] == "float32"
    (stage,) = record["stages"]
    worst = stage["worst"]
    assert stage["name"] == "out" and not stage["within"] and worst["index"] == [1, 2, 4, 5]
    assert worst["error"] == pytest.approx(0.25, rel=1e-5) and stage["margin"] == worst["error"] / worst["allowed"]
    allowance = np.load(saved / "a.npz")
    assert sorted(allowance) == ["allowed_out", "expected_out"]
    assert allowance["allowed_out"][1, 2, 4, 5] == worst["allowed"]
    assert allowance["expected_out"][1, 2, 4, 5] == worst["expected"]
    assert (allowance["allowed_out"] > 0).all()


def test_a_json_path_that_cannot_be_written_is_one_line_and_the_verdict_is_still_printed(saved, capsys):
    (saved / "taken").write_text("a file where a folder should be")
    assert cli.main(["explain", str(saved / "mine.npz"), "--json", str(saved / "taken" / "v.json")]) == 74
    captured = capsys.readouterr()
    assert "verdict: beyond" in captured.err and "(--json)" in captured.err.splitlines()[-1]


def test_a_result_the_declared_dtype_cannot_hold_is_refused_with_how_to_pass_it(tmp_path):
    q, k, v = qkv_arrays()
    out = _attention(q, k, v, "float32")  # float32 numbers, declared bfloat16
    np.savez(tmp_path / "mine.npz", q=q, k=k, v=v, out=out, dtype=np.array("bfloat16"))
    with pytest.raises(problem.BadInput) as refused:
        problem.Problem(tmp_path / "mine.npz", problem.load(tmp_path / "mine.npz"))
    said = str(refused.value)
    assert "not bfloat16 numbers" in said and "out.float()" in said and "leave dtype out" in said, said
    assert "the first" in said and "\n" not in said


def test_the_allowance_of_masked_scores_holds_their_hidden_keys_without_a_warning(tmp_path):
    """-inf where a key is hidden: the stage is judged there by its exact -inf, and its allowance is written whole
    (ONNX's cases give the masked scores; a stray inf - inf warning failed them under pytest's warnings-as-errors)."""
    q, k, v = qkv_arrays()
    hidden = np.zeros((6, 9), dtype=bool)
    hidden[:, -2:] = True
    stages = float32_stages(q, k, v, hidden)
    np.savez(tmp_path / "mine.npz", q=q, k=k, v=v, mask=hidden, masked=stages["masked"], out=stages["out"])
    code = cli.main(["explain", str(tmp_path / "mine.npz"), "--allowance", str(tmp_path / "a.npz")])
    assert code == 0
    allowance = np.load(tmp_path / "a.npz")
    assert np.isneginf(allowance["expected_masked"][..., -2:]).all()
    assert allowance["allowed_masked"].shape == stages["masked"].shape


def test_json_writes_inf_and_nan_as_strings():
    assert record.finite({"a": [float("inf"), np.float64("-inf")], "b": np.nan, "c": 1.5}) == {
        "a": ["inf", "-inf"],
        "b": "nan",
        "c": 1.5,
    }
