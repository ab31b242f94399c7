"""Each input on its own (attention_conformance/cases/input_values.py): cumulative lengths as flash-attn's
cu_seqlens, and scalars refused outside their ranges, a bool never taken for a number."""

import pytest

from attention_conformance.cases import input_values


@pytest.mark.parametrize("good", [[0, 1], [0, 5, 6, 13], [0, input_values.MAX_TOKENS]])
def test_cumulative_lengths_start_at_zero_and_increase(good):
    assert input_values.offsets(good)


@pytest.mark.parametrize(
    "bad",
    [[0], [1, 5], [0, 5, 5, 9], [0, 7, 3], [0, 2.0], [0, True], [0, input_values.MAX_TOKENS + 1], "0,5", None],
)
def test_anything_else_is_refused(bad):
    assert not input_values.offsets(bad)


def test_scalars_refuse_a_bool_for_a_number_and_a_value_past_their_range():
    valid, _ = input_values.SCALARS["num_heads"]
    assert valid(4) and not valid(True) and not valid(0) and not valid(65)
    seed, what = input_values.SCALARS["seed"]
    assert seed(input_values.MAX_SEED) and not seed(input_values.MAX_SEED + 1) and str(input_values.MAX_SEED) in what
