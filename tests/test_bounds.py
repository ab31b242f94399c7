"""Derived error bounds (attention_conformance/bounds.py): a float32 or float16 computation of a product and
a softmax lands within the bound of the exact answer, a wrong one does not, storing in the dtype rounds once
more, and a step with no rule raises instead of dropping its bound. (tests/run/ checks the bounds on the
reference's whole cases; here, each step alone on a few numbers.)"""

import numpy as np
import pytest

from attention_conformance import bounds
from attention_conformance.bounds import Bounded, Unbounded

RNG = np.random.default_rng(0)
A = RNG.uniform(-1, 1, (4, 16)).astype(np.float32)
B = RNG.uniform(-1, 1, (16, 3)).astype(np.float32)
SCORES = RNG.uniform(-5, 5, (3, 8)).astype(np.float32)


def _within(got, bounded):
    return np.all(np.abs(np.asarray(got, dtype=np.float64) - bounded.value) <= bounded.err)


def test_a_float32_product_is_within_its_bound_and_a_wrong_one_is_not():
    with bounds.computed_in("float32"):
        product = bounds.matmul(Bounded(A), Bounded(B))
        assert product.value == pytest.approx(A.astype(np.float64) @ B.astype(np.float64), abs=1e-15)
        assert _within(A @ B, product) and _within(A[None] @ B, product)  # batched or not: the same sums
        assert _within(np.einsum("tk,kh->th", A, B), product)
        assert not _within((A @ B) * (1 + 1e-4), product)  # an error of 1e-4 is ~800 float32 units
        assert bounds.matmul(Bounded(A), Bounded(B[:, 0])).shape == (4,)  # a vector, as matmul takes it


def test_a_float32_softmax_is_within_its_bound_and_a_float16_one_is_not():
    def softmax(s):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    with bounds.computed_in("float32"):
        weights = bounds.softmax(Bounded(SCORES))
        assert weights.value.sum(axis=-1) == pytest.approx(1.0, abs=1e-15)
        assert _within(softmax(SCORES), weights)
        assert not _within(softmax(SCORES.astype(np.float16)), weights)


def test_hidden_keys_weigh_exactly_nothing_and_a_row_with_none_visible_is_zero():
    hidden = np.zeros(SCORES.shape, bool)
    hidden[0, 2:] = True
    hidden[1] = True
    with bounds.computed_in("float32"):
        weights = bounds.softmax(Bounded(SCORES), hidden)
    assert np.all(weights.value[hidden] == 0) and np.all(weights.err[hidden] == 0)
    assert weights.value[0].sum() == pytest.approx(1.0) and np.all(weights.err[1] == 0)


def test_a_sum_counts_the_roundings_of_its_nonzero_terms_only():
    # A hidden key's weight is an exact 0: adding it rounds nothing, so a causal row of 2 visible keys among 512 is
    # bounded as a row of 2 (issue 74: the first queries of a long causal prefill were bounded as the last).
    scores = RNG.uniform(-1, 1, (1, 512))
    values = RNG.uniform(-1, 1, (512, 4))
    hidden = np.arange(512)[None, :] >= 2
    with bounds.computed_in("float32"):
        long = bounds.matmul(bounds.softmax(Bounded(scores), hidden), Bounded(values))
        short = bounds.matmul(bounds.softmax(Bounded(scores[:, :2])), Bounded(values[:2]))
    assert np.allclose(long.err, short.err, rtol=1e-12)  # 2.8 times it when the hidden keys counted


def test_a_half_precision_product_is_within_its_bound_once_stored():
    a, b = A.astype(np.float16), B.astype(np.float16)
    got = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)  # float32 sums, as the frameworks do
    with bounds.computed_in("float16"):
        product = bounds.matmul(Bounded(a), Bounded(b))
        assert not _within(got, product)  # the sums' bound alone: float16's own rounding is missing
        assert _within(got, bounds.stored(product))
        assert np.all(bounds.stored(Bounded(a)).err == 0)  # an input given in the dtype is exact
        assert bounds.stored(2.0) == 2.0


def test_computed_in_sets_where_sums_round_and_what_overflows():
    with bounds.computed_in("float16"):
        assert float((Bounded(1.0) + Bounded(2.0)).err) == 3 * 2**-24  # float32's rounding, inside a step
    with bounds.computed_in("float16", sums_in_dtype=True):
        assert float((Bounded(1.0) + Bounded(2.0)).err) == 3 * 2**-11
    with bounds.computed_in("float16") as overflowed:
        bounds.stored(Bounded([1.0, 7e4]) + Bounded([1.0, 1.0]))
        bounds.stored(Bounded([6e4]))
    assert overflowed == [70001.0]
    with pytest.raises(RuntimeError, match="computed_in"):
        Bounded(1.0)  # outside computed_in, no dtype to bound in


@pytest.mark.parametrize(
    "step",
    [
        lambda x: np.exp(x),
        lambda x: np.where(x.value > 0, x, 0.0),  # dropout's step
        lambda x: np.asarray(x),
        lambda x: x.T,
        lambda x: np.add.reduce(x),
    ],
    ids=["exp", "where", "asarray", "transpose", "reduce"],
)
def test_a_step_with_no_rule_raises_instead_of_dropping_the_bound(step):
    with bounds.computed_in("float32"), pytest.raises(Unbounded, match="bound"):
        step(Bounded(SCORES))
