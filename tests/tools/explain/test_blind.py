"""Query rows explain has no answer for (an outside trial's, issue 73: a bfloat16 decode over 131,072 keys with a wrong
K/V head, or a tile of keys dropped, was "within ... rounding, not a bug"): where the allowance is wider than the
answer, an output of zeros is within, and the verdict says so instead of "within"."""

import numpy as np
import pytest
from explained import decode_arrays, explained

from attention_conformance.tools.explain import blind


def _rows(exact, derived, plain=None, dtype="float32", k=2.0):
    return blind.rows(dtype, exact, exact if plain is None else plain, derived, k)


def test_a_row_is_blind_where_zeros_pass_at_every_element_of_every_head():
    exact = np.full((1, 2, 4, 3), 0.5)
    derived = np.full(exact.shape, 0.1)
    derived[:, :, 1] = 0.6  # row 1: wider than the answer everywhere
    derived[:, :, 2] = 0.6
    derived[0, 1, 2, 2] = 0.1  # row 2: but one element of the second head is not
    exact[:, :, 3] = 0.0  # row 3: the answer is zero: zeros are right there, not blind
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
    monkeypatch.setattr(blind, "ELEMENTS", 8)
    assert _rows(exact, np.zeros(exact.shape), plain).tolist() == whole.tolist()


@pytest.mark.parametrize("mistake", [None, "tiled K/V heads", "last keys dropped"])
def test_a_long_bfloat16_decode_gets_no_answer_never_within(tmp_path, mistake):
    code, said = explained(tmp_path, **decode_arrays(16384, mistake))
    assert code == blind.NO_ANSWER, said
    assert "verdict: no answer on every query row judged (1): an output of zeros would be within" in said
    assert "rounding, not a bug" not in said


def test_in_float32_a_mistake_is_beyond_and_a_correct_decode_within(tmp_path):
    """The verdict's advice: the same attention computed in float32 is judged at this length."""
    assert explained(tmp_path, **decode_arrays(16384, "tiled K/V heads", "float32"))[0] == 1
    assert explained(tmp_path, **decode_arrays(16384, None, "float32"))[0] == 0


def test_a_short_bfloat16_decode_is_judged(tmp_path):
    code, said = explained(tmp_path, **decode_arrays(512))
    assert code == 0 and "rounding, not a bug" in said
