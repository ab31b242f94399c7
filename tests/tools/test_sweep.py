"""The model sweep's arithmetic (attention_conformance/tools/sweep.py) on hand-made numbers and rows: what one
output's measurement says (the k it needs, the share of the bound it uses), and the summary and table that
decide the model: declared divergences, raises and overflows counted apart, never in the worst needed k.
tests/run/test_tolerance_model.py checks the sweep's cases, its oracle, and margin_at against the judge."""

import math

import numpy as np
import pytest

from attention_conformance.tools import sweep

EXACT = np.array([[0.5, 0.25], [0.125, 1.0]])
PLAIN = EXACT + np.array([[1e-7, -2e-7], [0.0, 1e-7]])  # baseline B: the plain computation's worst, 2e-7
DERIVED = np.full(EXACT.shape, 1e-6)


def test_an_output_past_its_derived_bound_needs_the_k_that_brings_its_margin_to_1():
    got = EXACT.copy()
    ulp = 2.0**-26  # float32's at 0.125: the allowance holds one beside the bound (tolerance_model.last_place)
    got[1, 0] += 1.2e-6 + ulp  # 2e-7 past the bound and the ULP: one baseline
    row = sweep.measure("float32", got, EXACT, PLAIN, DERIVED, 2.0)
    assert row["baseline"] == pytest.approx(2e-7)
    assert row["needed_k"] == pytest.approx(1.0)
    assert row["bound_used"] == pytest.approx((1.2e-6 + ulp) / 1e-6)
    assert row["margin"] == pytest.approx((1.2e-6 + ulp) / (2.0 * 2e-7 + 1e-6 + ulp)), "judged at the model's k"
    assert sweep.margin_at(row, row["needed_k"]) == pytest.approx(1.0)
    assert "[1, 0]: got 0.1250012149011612, expected 0.125" in row["worst"]


def test_the_exact_answer_needs_no_k_and_a_nan_or_a_wrong_shape_needs_an_infinite_one():
    right = sweep.measure("float32", EXACT, EXACT, PLAIN, DERIVED, 2.0)
    assert (right["needed_k"], right["bound_used"], right["margin"], right["front"]) == (0.0, 0.0, 0.0, [])
    got = EXACT.copy()
    got[0, 1] = np.nan
    nan = sweep.measure("float32", got, EXACT, PLAIN, DERIVED, 2.0)
    assert nan["needed_k"] == nan["bound_used"] == nan["margin"] == nan["max_error"] == math.inf
    assert nan["front"] is None and sweep.margin_at(nan, 1e9) == math.inf, "no k makes a NaN right"
    shape = sweep.measure("float32", EXACT[0], EXACT, PLAIN, DERIVED, 2.0)
    assert shape == {"margin": math.inf, "needed_k": math.inf, "problem": "shape [2], expected [2, 2]"}


def _row(index, op, output, dtype, status, needed_k=None, margin=None, used=None, **shape):
    row = {"index": index, "op": op, "output": output, "dtype": dtype, "status": status}
    row |= {"T": 8, "S": 8, "H": 4, "N": 1, "K": 1, "B": 0, "sigma": 1.0} | shape
    return row | ({"needed_k": needed_k, "margin": margin, "bound_used": used} if needed_k is not None else {})


ROWS = [
    _row(0, "masked_attention", "weights", "float32", "within", 0.5, 0.3, 0.8),
    _row(0, "masked_attention", "context", "float32", "beyond", 3.0, 1.5, 2.0, mask="random"),
    _row(1, "causal_attention", "context", "float32", "declared", 50.0, 9.0, 9.0),
    _row(2, "decode_attention", "context", "float32", "skipped"),
    _row(3, "grouped_attention", "heads", "float32", "raised", math.inf, math.inf, None, N=4, K=2, B=2),
    _row(4, "grouped_attention", "heads", "float16", "within", 0.25, 0.5, 0.4, N=4, K=2, B=2, causal=True),
]


def test_the_summary_counts_each_status_and_takes_the_worst_k_over_measured_outputs_alone():
    summary = sweep.summarize(ROWS, {"float64": 1.0, "float32": 2.0, "float16": 3.0, "bfloat16": 4.0})
    assert list(summary) == ["float32", "float16"], "a dtype with no row is not summarised"
    f32 = summary["float32"]
    counts = {key: f32[key] for key in ("outputs", "cases", "measured", "beyond", "raised", "declared", "skipped")}
    assert counts == {"outputs": 5, "cases": 4, "measured": 2, "beyond": 1, "raised": 1, "declared": 1, "skipped": 1}
    assert (f32["worst_needed_k"], f32["worst_bound_used"], f32["worst_margin"]) == (3.0, 2.0, 1.5)
    assert f32["worst_needed_k_at"] == "masked_attention.context T=8 S=8 H=4 sigma=1 mask=random"
    assert f32["by_op"] == {"masked_attention": 3.0}
    assert summary["float16"]["worst_margin_at"] == "grouped_attention.heads T=8 S=8 H=4 N=4/K=2 B=2 sigma=1 causal"


def test_the_table_has_a_line_a_dtype_and_counts_raises_as_beyond():
    summary = sweep.summarize(ROWS, {"float64": 1.0, "float32": 2.0, "float16": 3.0, "bfloat16": 4.0})
    lines = sweep.table(summary).splitlines()
    # model k, cases, outputs measured, skipped, declared, beyond or raised, share of the bound, needed k, at, margin
    assert lines[2] == (
        "| float32 | 2 | 4 | 2 | 1 | 1 | 2 | 2 | 3 | masked_attention.context T=8 S=8 H=4 sigma=1 mask=random | 1.5 |"
    )
    assert lines[3].startswith("| float16 | 3 | 1 | 1 | 0 | 0 | 0 | 0.4 | 0.25 | grouped_attention.heads")
    assert lines[-1] == "worst needed k by op: float32 masked_attention 3; float16 grouped_attention 0.25"
