"""An adversarial search for false alarms: inputs on which a correct implementation breaks the tolerance
model (judge.py). Hypothesis draws the inputs where correct code is hardest to tell from rounding
(cancellation: zero, constant and rank-one weights, rows that sum to nearly zero; wide dynamic range;
rows of up to 4096 keys; one visible key; decoding; random and padding masks; logits from 0.01 to
thousands) and, through `target`, breeds from those that came nearest the allowance. Every variant of
tests/correct_variants.py is judged in every dtype; the worst margin per variant and dtype is printed.

The suite env runs it at the "ci" profile's budget; a larger search (docs/tolerance-model.md):
    HYPOTHESIS_PROFILE=search pytest tests/test_false_alarms.py -s
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, target
from hypothesis import strategies as st

import correct_variants
from attention_conformance import judge
from attention_conformance.adapters import reference
from attention_conformance.contract import np_dtype

settings.register_profile(
    "search", max_examples=int(os.environ.get("SEARCH_EXAMPLES", "300")), deadline=None, print_blob=True
)
ELEMENTS = 1 << 21  # T x S x H at most: the oracle, the plain computation and the bound stay near a second
_worst = {}  # (variant, dtype) -> (margin, where)
MODEL = judge.model()


@st.composite
def problems(draw):
    """x [T, D] and weights [D, H], `hidden` [T, S] with S = T (self-attention) or a long cache."""
    T = draw(st.sampled_from((1, 2, 3, 5, 8, 16, 33, 64)))
    S = T
    if T <= 4 and draw(st.booleans()):
        S = draw(st.sampled_from((64, 256, 1024, 4096)))  # decoding: the last T queries over a cache
    D = draw(st.sampled_from((1, 2, 3, 4, 8, 16)))
    H = draw(st.sampled_from((1, 2, 3, 4, 8, 16, 64)))
    assume(T * S * H <= ELEMENTS)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x_kind = draw(st.sampled_from(("normal", "uniform", "wide", "constant", "centred")))
    x = {
        "normal": lambda: rng.standard_normal((S, D)),
        "uniform": lambda: rng.random((S, D)),
        "wide": lambda: rng.standard_normal((S, D)) * 10.0 ** rng.integers(-3, 4, (S, 1)),
        "constant": lambda: np.full((S, D), rng.standard_normal()),
        "centred": lambda: (lambda a: a - a.mean(axis=-1, keepdims=True))(rng.standard_normal((S, D))),
    }[x_kind]()

    def weight():
        kind = draw(st.sampled_from(("normal", "normal", "zero", "ones", "constant", "rank_one")))
        size = draw(st.sampled_from((0.01, 0.3, 1.0, 3.0, 10.0)))
        return {
            "normal": lambda: size * rng.standard_normal((D, H)),
            "zero": lambda: np.zeros((D, H)),
            "ones": lambda: np.ones((D, H)),
            "constant": lambda: np.full((D, H), size),
            "rank_one": lambda: size * np.outer(rng.standard_normal(D), rng.standard_normal(H)),
        }[kind]()

    w = [weight() for _ in range(3)]
    mask = draw(st.sampled_from(("none", "causal", "random", "one_visible", "padding")))
    queries = np.arange(S - T, S)  # bottom-right: the last T positions query
    hidden = np.zeros((T, S), dtype=bool)
    if mask == "causal":
        hidden = np.arange(S)[None, :] > queries[:, None]
    elif mask == "random":
        hidden = rng.random((T, S)) < draw(st.sampled_from((0.5, 0.95)))
    elif mask == "one_visible":
        hidden = np.ones((T, S), dtype=bool)
    elif mask == "padding":
        hidden[:, S - int(rng.integers(0, S)) :] = True
    hidden[np.arange(T), rng.integers(0, S, T)] = False  # every row sees a key: a fully hidden row is a convention
    return x, w, hidden


def _judged(dtype, x, w, hidden):
    """(exact, plain, derived) of attention with these inputs in dtype: x [S, D] gives keys and values,
    its last T rows the queries."""
    T = hidden.shape[0]
    x, w = _rounded(x, dtype), [_rounded(a, dtype) for a in w]

    def attention(x, w_query, w_key, w_value, rounding=None):
        q = reference.project(x[..., x.shape[-2] - T :, :], w_query)
        return judge.attend(q, reference.project(x, w_key), reference.project(x, w_value), hidden, rounding=rounding)

    exact = attention(x, *w)
    with reference.rounding_to(np_dtype(judge.plain_dtype(dtype))):
        plain = attention(x, *w, rounding=judge.plain_dtype(dtype))
    return x, w, exact, plain, judge.bound(dtype, attention, x, *w)


def _rounded(a, dtype):
    return np.asarray(a, dtype=np.float32).astype(np_dtype(dtype)).astype(np.float64)


def _search(dtype):
    @settings(suppress_health_check=list(HealthCheck), deadline=None)
    @given(problems())
    def search(problem):
        x, w, hidden = problem
        with np.errstate(all="ignore"):  # a half-precision overflow is assumed away below
            x, w, exact, plain, derived = _judged(dtype, *problem)
        assume(all(np.isfinite(plain[n]).all() and np.isfinite(exact[n]).all() for n in exact))  # no overflow
        T = hidden.shape[0]
        scaled = np.where(hidden, 0, exact["scores"] / np.sqrt(w[0].shape[-1]))
        variants = correct_variants.numpy_variants(no_max_safe=np.abs(scaled).max() < 60)
        variants |= correct_variants.torch_variants()
        worst, failures = 0.0, []
        for name, attention in variants.items():
            with np.errstate(all="ignore"):
                got = attention(x[x.shape[0] - T :], x, *w, hidden, dtype)
            for output, value in got.items():
                v = judge.judge(output, dtype, value, exact[output], plain[output], derived[output], MODEL[dtype])
                worst = max(worst, v.margin)
                if v.margin > _worst.get((name, dtype), (-1.0,))[0]:
                    _worst[name, dtype] = (v.margin, f"{output}, T={T} S={hidden.shape[1]} H={w[0].shape[-1]}")
                if not v.within:
                    failures.append(f"{name}: {v.describe()}")
        target(min(worst, 1e6), label="worst margin of a correct variant")
        assert not failures, "\n".join(failures)

    search()


@pytest.mark.parametrize("dtype", judge.DTYPES)
def test_no_correct_variant_is_a_false_alarm(dtype, capsys):
    _search(dtype)
    with capsys.disabled():
        for (name, d), (margin, where) in sorted(_worst.items()):
            if d == dtype:
                print(f"\nfalse-alarm search {dtype} {name}: worst margin {margin:.3g} ({where})", end="")
