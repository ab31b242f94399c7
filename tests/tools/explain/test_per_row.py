"""Verdicts per query row. No answer (an outside trial's, issue 73: a bfloat16 decode over 131,072 keys with a wrong
K/V head, or a tile of keys dropped, was "within ... rounding, not a bug"): where the allowance is wider than the
answer, an output of zeros is within, and the verdict says so instead of "within". Beyond: the rows beyond, the first
of them where a kernel starts to go wrong (a trial's tile skipped from row 300 was named by its worst, row 354)."""

import numpy as np
import pytest
from explained import causal_arrays, decode_arrays, explained

from attention_conformance.run import tolerance_model
from attention_conformance.tools.examples import _attention
from attention_conformance.tools.explain import command, per_row


def _rows(exact, derived, plain=None, dtype="float32", k=2.0):
    return per_row.without_answer(dtype, exact, exact if plain is None else plain, derived, k)


def test_a_row_has_no_answer_where_zeros_pass_at_every_element_of_every_head():
    exact = np.full((1, 2, 4, 3), 0.5)
    derived = np.full(exact.shape, 0.1)
    derived[:, :, 1] = 0.6  # row 1: wider than the answer everywhere
    derived[:, :, 2] = 0.6
    derived[0, 1, 2, 2] = 0.1  # row 2: but one element of the second head is not
    exact[:, :, 3] = 0.0  # row 3: the answer is zero: zeros are right there
    derived[:, :, 3] = 1.0
    assert _rows(exact, derived).tolist() == [False, True, False, False]


def test_the_plain_error_counts_over_the_whole_tensor_whatever_the_pieces(monkeypatch):
    """k x max|plain - exact| is the whole tensor's, as the judge's: a large plain error in the last row widens the
    first row's allowance too, with the rows taken one at a time."""
    rng = np.random.default_rng(0)
    exact = rng.uniform(0.1, 0.2, (2, 64, 8))
    plain = exact.copy()
    plain[-1, -1, -1] += 0.1  # 2 x 0.1 covers every |exact| <= 0.2
    whole = _rows(exact, np.zeros(exact.shape), plain)
    assert whole.all()
    monkeypatch.setattr(per_row, "ELEMENTS", 8)
    assert _rows(exact, np.zeros(exact.shape), plain).tolist() == whole.tolist()


@pytest.mark.parametrize("mistake", [None, "tiled K/V heads", "last keys dropped"])
def test_a_long_bfloat16_decode_gets_no_answer_never_within(tmp_path, mistake):
    code, said = explained(tmp_path, **decode_arrays(16384, mistake))
    assert code == per_row.NO_ANSWER, said
    assert "verdict: no answer on every query row judged (1): an output of zeros would be within" in said
    assert "rounding, not a bug" not in said


def test_in_float32_a_mistake_is_beyond_and_a_correct_decode_within(tmp_path):
    """The verdict's advice: the same attention computed in float32 is judged at this length."""
    assert explained(tmp_path, **decode_arrays(16384, "tiled K/V heads", "float32"))[0] == 1
    assert explained(tmp_path, **decode_arrays(16384, None, "float32"))[0] == 0


def test_a_short_bfloat16_decode_is_judged(tmp_path):
    code, said = explained(tmp_path, **decode_arrays(512))
    assert code == 0 and "rounding, not a bug" in said


def test_a_row_is_beyond_where_one_element_of_one_head_is(monkeypatch):
    exact = np.full((1, 2, 4, 3), 0.5)
    got = exact.copy()
    got[0, 1, 2, 0] += 0.2  # row 2, second head: beyond 0.1
    got[0, 0, 3, 2] = np.nan  # row 3: a NaN is never within
    got[0, 0, 1, 1] += 0.05  # row 1: within
    found = per_row.beyond("float32", got, exact, exact, np.full(exact.shape, 0.1), 2.0)
    assert found.tolist() == [False, False, True, True]
    monkeypatch.setattr(per_row, "ELEMENTS", 3)  # a row a piece
    assert per_row.beyond("float32", got, exact, exact, np.full(exact.shape, 0.1), 2.0).tolist() == found.tolist()


@pytest.mark.parametrize("rows", [None, 20])
def test_a_kernel_that_skips_a_tile_from_row_150_is_beyond_from_row_150(tmp_path, rows):
    """The tile edge, not the worst element: the first row beyond is the first row the kernel got wrong, whole, and in
    a --rows sample its first row judged past 150."""
    arrays = causal_arrays(256, 256, 4, 2, 32, seed=5)
    q, k, v = (arrays[n] for n in "qkv")
    hidden = tolerance_model.hidden_keys(256, 256, causal=True).copy()
    hidden[150:, 64:128] = True
    shared = [np.repeat(t, 2, axis=1) for t in (k, v)]
    wrong = _attention(q, *shared, "float32", hidden=hidden).astype(np.float32)
    arrays["out"][..., 150:, :] = wrong[..., 150:, :]
    path = tmp_path / "skipped.npz"
    np.savez(path, **arrays)
    record, lines = {}, []
    assert command.explain(path, out=lines.append, err=lines.append, record=record, rows=rows, seed=1) == 1
    assert record["rows_beyond"][0] == (150 if rows is None else min(r for r in record["rows"] if r >= 150))
    assert all(r >= 150 for r in record["rows_beyond"])
    said = next(line for line in lines if line.startswith("beyond on "))
    first = record["rows_beyond"][0]
    if rows is None:
        assert f"the first row {first}, the last 255" in said
    else:  # the sample's row before its first beyond bounds where the kernel starts to go wrong
        before = max(r for r in record["rows"] if r < first)
        assert (
            before < 150
            and f"row {before}, judged before it, is within: it starts in rows {before + 1}..{first})" in said
        )
