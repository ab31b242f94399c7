"""The conformance matrix (attention_conformance/publish/matrix.py) from small hand-made reports: one cell per
case x framework x dtype holding the worst of its tests, a MISSING column for an adapter that did not report
(never a passing one), and matrix.md and matrix.json written with the same content."""

import json

from attention_conformance.publish import matrix

OUTLINE = {
    "families": ["document values", "causal and masks"],
    # Listed out of family order: the rows follow the families, then the cases within each.
    "cases": [
        ["masked", "causal and masks", False],
        ["sat", "document values", False],
        ["empty_row", "causal and masks", True],
    ],
}


def _result(outcome, margin=None, ulp=None):
    return {"outcome": outcome, "margin": margin, "ulp": ulp, "message": None, "reason": None}


def _report(adapter, dtypes, tests):
    return {"adapter": adapter, "dtypes": dtypes, "tests": tests}


def _built(names=()):
    torch = _report(
        "torch",
        ["float32", "float16"],
        {
            "test_weights[torch-float32-sat]": _result("passed", 0.25, 0.5),
            "test_context[torch-float32-sat]": _result("passed", 0.5, 1.5),
            "test_context[torch-float16-sat]": _result("error"),
            "test_weights[torch-float32-masked]": _result("passed", 0.1),
            "test_context[torch-float32-masked]": _result("diverged"),
            "test_context[torch-float32-empty_row]": _result("diverged"),
            "test_context[torch-float16-masked]": _result("not applicable"),
            "not a test id": _result("failed"),  # the matrix shows the spec's tests alone
        },
    )
    return matrix.build({"torch": torch}, OUTLINE, list(names))


def test_each_cell_is_the_worst_of_its_tests_and_a_passed_cell_keeps_the_largest_margin():
    built = _built()
    assert built["columns"] == ["torch float32", "torch float16"]
    cells = {row["case"]: row["cells"] for row in built["rows"]}
    assert cells["sat"]["torch float32"] == {"status": "passed", "margin": 0.5, "ulp": 1.5, "tests": 2}
    assert cells["sat"]["torch float16"]["status"] == "failed", "an error is a failure, never a missing cell"
    assert cells["masked"]["torch float32"]["status"] == "diverged", "one passed output does not hide a divergence"
    assert cells["masked"]["torch float16"]["status"] == "not applicable"
    assert cells["empty_row"]["torch float16"] == {"status": "not run in this dtype"}


def test_a_divergence_on_a_case_that_states_a_convention_is_another_convention():
    cells = {row["case"]: row["cells"] for row in _built()["rows"]}
    assert cells["empty_row"]["torch float32"]["status"] == "other convention"
    assert cells["masked"]["torch float32"]["status"] == "diverged"


def test_an_adapter_without_a_report_is_a_missing_column_in_every_row():
    built = _built(names=["torch", "jax"])
    assert built["columns"] == ["torch float32", "torch float16", "jax"], "a reported adapter is not missing"
    assert all(row["cells"]["jax"] == {"status": "missing"} for row in built["rows"])
    assert "MISSING" in matrix.markdown(built).splitlines()[2]


def test_rows_follow_the_outlines_families_then_its_cases():
    rows = [(row["family"], row["case"]) for row in _built()["rows"]]
    assert rows == [("document values", "sat"), ("causal and masks", "masked"), ("causal and masks", "empty_row")]


def test_the_markdown_and_the_json_written_hold_the_same_matrix(tmp_path):
    built = _built(names=["jax"])
    text, written = matrix.write(built, tmp_path / "out")
    assert written[:2] == [tmp_path / "out" / "matrix.md", tmp_path / "out" / "matrix.json"]
    assert (tmp_path / "out" / "matrix.md").read_text() == text
    assert json.loads((tmp_path / "out" / "matrix.json").read_text()) == built
    # The heatmap needs matplotlib (the [summary] extra): written, or a note saying why not.
    assert written[2] == tmp_path / "out" / "matrix.png" or written[2].startswith("no matrix.png: install matplotlib")
    lines = text.splitlines()
    assert lines[0] == "| family | case | torch float32 | torch float16 | jax |"
    assert lines[2] == "| document values | sat | ok 0.50 1.5u | FAIL | MISSING |"
    assert lines[4] == "|  | empty_row | conv | - | MISSING |", "a family is named on its first row only"
    assert lines[-1] == matrix.LEGEND
