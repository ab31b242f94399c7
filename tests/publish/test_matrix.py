"""The conformance matrix (attention_conformance/publish/matrix.py) from small hand-made reports: one cell per
case x framework x dtype holding the worst of its tests, a MISSING column for an adapter that did not report
(never a passing one), and matrix.md and matrix.json written with the same content."""

import json

from attention_conformance.contract import registry
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


def test_a_convention_judged_on_its_side_reads_side_and_one_without_a_side_conv():
    judged = {"kind": "convention", "fact": "nan_row", "side": "fully_masked_rows=nan"}
    assert matrix.standing({**_result("passed", 0.1), "declared": judged}) == "on its side"
    assert matrix.standing({**_result("diverged"), "declared": {"kind": "convention"}}) == "other convention"
    assert matrix.SHORT["on its side"] == "side" and matrix.RANK["on its side"] < matrix.RANK["other convention"]


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


def test_the_terminal_gets_a_row_per_family_and_a_column_per_framework_its_dtypes_folded_in():
    lines = matrix.compact(_built(names=["jax"]), width=60).splitlines()
    assert lines[:5] == [
        "family (cases)        torch   jax",
        "--------------------  ------  -------",
        "document values (1)   FAIL 1  MISSING",
        "causal and masks (2)  div 1   MISSING",  # its divergence before its other convention and its n/a
        "every case (3)        FAIL 1  MISSING",
    ]
    assert all(len(line) <= 60 for line in lines), "the legend wraps too"


# A full run's columns (tox -m full): every built-in adapter and its other mode, in four dtypes, read from the registry
# rather than written here (a file that names every framework is one a new framework must be added to).
ADAPTERS = sorted(registry.NAMES + tuple(f"{name}-compiled" for name in registry.NAMES))
FAMILIES = ["document values", "mapping table rows", "attention operator", "grouped heads", "mask conventions"]


def _full_run(failing):
    """matrix.build of twelve adapters x four dtypes, every test passed but `failing` (adapter, dtype, case)."""
    cases = [[f"{fam.replace(' ', '_')}_{i}", fam, False] for fam in FAMILIES for i in range(9)]
    outline = {"families": FAMILIES, "cases": cases}
    found = {}
    for adapter in ADAPTERS:
        dtypes = ["float32", "float64", "float16", "bfloat16"]
        tests = {
            f"test_context[{adapter}-{dtype}-{case}]": _result("passed", 0.5 * i / 9)
            for dtype in dtypes
            for case, _, _ in outline["cases"]
            for i in [int(case[-1])]
        }
        found[adapter] = _report(adapter, dtypes, tests)
    adapter, dtype, case = failing
    found[adapter]["tests"][f"test_context[{adapter}-{dtype}-{case}]"] = _result("failed", 3.0)
    return matrix.build(found, outline, ["onnxruntime-eager", "not-reported"])


def test_the_terminal_matrix_of_a_full_run_fits_120_columns_and_names_the_failing_family():
    text = matrix.compact(_full_run(("torch-compiled", "bfloat16", "grouped_heads_4")))
    lines = text.splitlines()
    assert max(map(len, lines)) <= 120, max(lines, key=len)
    assert len(lines) < 60, "a row per family, not per case"
    heads = [line for line in lines if line.startswith("family (cases)")]
    assert len(heads) > 1, "twelve frameworks do not fit one block of 120 columns"
    for name in [*ADAPTERS, "not-reported"]:
        assert sum(f"  {name} " in f"{head} " for head in heads) == 1, f"{name}: not one column"
    # Each block: its header, a rule, then a row per family and the row of every case.
    block = next(i for i, head in enumerate(lines) if head.startswith("family (cases)") and "torch-compiled" in head)
    at = lines[block].index("  torch-compiled") + 2
    shown = {line[: line.index(" (")]: line[at:].split("  ")[0] for line in lines[block + 2 : block + 8]}
    assert shown == {
        "document values": "ok 0.44",
        "mapping table rows": "ok 0.44",
        "attention operator": "ok 0.44",
        "grouped heads": "FAIL 1",
        "mask conventions": "ok 0.44",
        "every case": "FAIL 1",
    }
    assert text.count("FAIL 1") == 2, "no other framework's family fails"
    assert sum(line.endswith("  MISSING") for line in lines) == len(FAMILIES) + 1, "the adapter that did not report"


def test_no_passing_colour_reads_as_a_failure_and_each_status_has_its_own():
    low, high = matrix.PASSED_COLOURS
    for t in (0, 0.25, 0.5, 0.63, 0.75, 1):
        r, g, b = ((1 - t) * lo + t * hi for lo, hi in zip(low, high))
        assert g >= r and g >= b, f"a passed cell at margin {t} is not green: {(r, g, b)}"
    r, g, b = matrix.COLOURS["failed"]
    assert r > 0.7 and g < 0.3 and b < 0.3, "a failure is red"
    colours = [*matrix.COLOURS.values(), low, high]
    assert len(set(colours)) == len(colours), "two statuses share a colour"
    assert len(set(matrix.SHORT.values())) == len(matrix.SHORT), "two statuses share a word"
