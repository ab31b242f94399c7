"""The other sides of the spec's splits, as the oracle computes them (attention_conformance/sides.py): each is the
framework behaviour its declarations quote, computed by hand here, and the spec's own side is untouched."""

import numpy as np
import pytest

from attention_conformance import bounds, sides
from attention_conformance.adapters import reference

X = np.random.default_rng(0).uniform(-1, 1, (6, 4))
W = [np.random.default_rng(s).uniform(-1, 1, (4, 4)) for s in (1, 2, 3)]
HIDDEN_ROW_0 = np.zeros((6, 6), dtype=bool)
HIDDEN_ROW_0[0] = True


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_a_side_is_a_named_split_and_another_of_its_choices():
    assert sides.problem({"fully_masked_rows": "nan"}) is None
    assert "not a split" in sides.problem({"fully_masked_row": "nan"})
    assert "the spec's is zeros" in sides.problem({"fully_masked_rows": "zeros"})  # the spec's own is no divergence
    assert "a mapping" in sides.problem("nan")


def test_the_spec_side_is_what_is_computed_outside_taking_and_after_it():
    with sides.taking({"fully_masked_rows": "nan"}):
        assert sides.of("fully_masked_rows") == "nan" and sides.of("causal_alignment") == "bottom_right"
    assert sides.of("fully_masked_rows") == "zeros" and sides.taken() == ()


@pytest.mark.parametrize(
    "choice, row", [("zeros", np.zeros(6)), ("nan", np.full(6, np.nan)), ("uniform", np.full(6, 1 / 6))]
)
def test_a_fully_masked_row_on_each_side(choice, row):
    side = None if choice == "zeros" else {"fully_masked_rows": choice}
    with sides.taking(side):
        found = reference.masked_attention(X, *W, HIDDEN_ROW_0)
    np.testing.assert_array_equal(found["weights"][0], row)
    q, k, v = X @ W[0], X @ W[1], X @ W[2]
    np.testing.assert_allclose(found["weights"][1:], _softmax(q @ k.T / 2)[1:], rtol=1e-14)
    if choice == "uniform":  # every key's weight alike: the mean of the values
        np.testing.assert_allclose(found["context"][0], v.mean(axis=0), rtol=1e-14)


def test_a_uniform_rows_bound_is_a_rounded_one_over_s_and_the_nan_row_carries_none():
    scaled = np.zeros((2, 4))
    hidden = np.array([[True] * 4, [False] * 4])
    with bounds.computed_in("float32"):
        for choice, value in (("uniform", 0.25), ("nan", np.nan)):
            with sides.taking({"fully_masked_rows": choice}):
                found = reference._masked_softmax(bounds.Bounded(scaled), hidden)
            np.testing.assert_array_equal(found.value[0], np.full(4, value))
            assert np.all(found.err[0] < 1e-6) and (choice == "uniform") == bool(found.err[0].max() > 0)


def test_a_causal_flag_aligned_top_left_lets_query_i_of_the_block_see_keys_0_to_i():
    start = 2
    with sides.taking({"causal_alignment": "top_left"}):
        top_left = reference.causal_flag(X, *W, start)
    q, k, v = X[start:] @ W[0], X @ W[1], X @ W[2]
    i, j = np.arange(4)[:, None], np.arange(6)[None, :]
    expected = _softmax(np.where(j > i, -np.inf, q @ k.T / 2)) @ v
    np.testing.assert_allclose(top_left, expected, rtol=1e-13)
    bottom_right = reference.causal_flag(X, *W, start)  # the spec's: query i sees keys 0..i + start
    np.testing.assert_allclose(bottom_right, _softmax(np.where(j > i + start, -np.inf, q @ k.T / 2)) @ v, rtol=1e-13)


def test_a_window_aligned_top_left_counts_its_band_from_query_0():
    with sides.taking({"sliding_window": "top_left"}):
        found = reference.window_flag(X, *W, 2, 3)
    q, k, v = X[3:] @ W[0], X @ W[1], X @ W[2]
    i, j = np.arange(3)[:, None], np.arange(6)[None, :]
    np.testing.assert_allclose(found, _softmax(np.where((j > i) | (j <= i - 2), -np.inf, q @ k.T / 2)) @ v, rtol=1e-13)


def test_keras_attention_layer_unscaled_is_the_softmax_of_raw_scores():
    with sides.taking({"attention_layer_scale": "unscaled"}):
        found = reference.attention_layer(X, *W)
    q, k, v = X @ W[0], X @ W[1], X @ W[2]
    np.testing.assert_allclose(found, _softmax(q @ k.T) @ v, rtol=1e-13)


def test_llama4_chunks_from_index_0_of_a_left_padded_row_are_the_legacy_overlays():
    """transformers' _legacy_chunked_overlay counts chunks from index 0 of the padded row; the spec's from its first
    real token. A row of 6 left-padded by 2, chunks of 3: the spec's cut at 5 (2..4, 5), the legacy's at 3 (2, 3..5)."""
    padding = np.array([[True, True, False, False, False, False]])
    x = X[None]
    q, k, v = X @ W[0], X @ W[1], X @ W[2]
    i, j = np.arange(6)[:, None], np.arange(6)[None, :]

    def attended(first):
        hidden = (j > i) | ((j - first) // 3 != (i - first) // 3) | padding[0][None, :]
        with np.errstate(invalid="ignore"):
            context = _softmax(np.where(hidden, -np.inf, q @ k.T / 2)) @ v
        return np.where(padding[0][:, None], 0.0, context)

    np.testing.assert_allclose(reference.chunked_flag(x, *W, 3, padding)[0], attended(2), rtol=1e-13)
    with sides.taking({"chunk_alignment": "position"}):
        legacy = reference.chunked_flag(x, *W, 3, padding)[0]
    np.testing.assert_allclose(legacy, attended(0), rtol=1e-13)
    assert not np.allclose(legacy, attended(2))  # the split shows on this row
    unpadded = np.zeros_like(padding)
    spec_side = reference.chunked_flag(x, *W, 3, unpadded)
    with sides.taking({"chunk_alignment": "position"}):  # without padding the two sides agree
        np.testing.assert_array_equal(reference.chunked_flag(x, *W, 3, unpadded), spec_side)
