"""The false-alarm search on the scale step alone (the contract's `scale`, which fuzz judges on its own): every way
tests/correct_variants.py's SCALES computes scores / sqrt(d_k), in every dtype, within the tolerance model on any
scores. Issue 58: the torch adapter one ULP off was accused here at 2 ULP, its bound counting one rounding for the
scale factor where kernels make up to three (the root, its reciprocal, an rsqrt's last place)."""

import correct_variants
import hypothesis_profiles  # noqa: F401 - the ci/dev/search profiles, loaded before any @given
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, target
from hypothesis import strategies as st

from attention_conformance.adapters import reference
from attention_conformance.dtypes import DTYPES, np_dtype
from attention_conformance.run import tolerance_model

MODEL = tolerance_model.model()
_worst = {}  # (variant, dtype) -> margin


@st.composite
def scores(draw):
    """Scores [T, S] in one of: ordinary, one binade's bottom (where a ULP is largest against the value), wide."""
    T, S = draw(st.sampled_from((1, 2, 3, 8))), draw(st.sampled_from((1, 2, 5, 16, 64)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(("normal", "binade_bottom", "wide", "one_value")))
    size = draw(st.sampled_from((0.01, 1.0, 30.0, 1000.0)))
    values = {
        "normal": lambda: size * rng.standard_normal((T, S)),
        "binade_bottom": lambda: size * (1 + rng.random((T, S)) / 64) * rng.choice((-1, 1), (T, S)),
        "wide": lambda: rng.standard_normal((T, S)) * 10.0 ** rng.integers(-3, 4, (T, S)),
        "one_value": lambda: np.full((T, S), size * (1 + rng.random() / 64)),
    }[kind]()
    return values, draw(st.sampled_from((1, 2, 3, 5, 7, 8, 64, 80, 96, 128, 256)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_no_way_of_scaling_is_a_false_alarm(dtype, capsys):
    @settings(suppress_health_check=list(HealthCheck), deadline=None)
    @given(scores())
    def search(drawn):
        values, d_k = drawn
        held = values.astype(np.float32).astype(np_dtype(dtype)).astype(np.float64)
        if not np.isfinite(held).all():
            return
        exact = reference.scale(held, d_k)
        with reference.rounding_to(np_dtype(tolerance_model.plain_dtype(dtype))):
            plain = np.asarray(reference.scale(held, d_k)).astype(np_dtype(tolerance_model.plain_dtype(dtype)))
        derived = tolerance_model.bound(dtype, reference.scale, held, d_k)
        worst, failures = 0.0, []
        for name, scale in correct_variants.SCALES.items():
            verdict = tolerance_model.judge(
                "scaled", dtype, scale(held, d_k, dtype), exact, plain, derived, MODEL[dtype]
            )
            _worst[name, dtype] = max(_worst.get((name, dtype), 0.0), verdict.margin)
            worst = max(worst, verdict.margin)
            if not verdict.within:
                failures.append(f"{name}, d_k {d_k}: {verdict.describe()}")
        target(worst, label="worst margin of a correct scale")
        assert not failures, "\n".join(failures)

    search()
    with capsys.disabled():
        for (name, d), margin in sorted(_worst.items()):
            if d == dtype:
                print(f"\nfalse-alarm search {dtype} scale, {name}: worst margin {margin:.3g}", end="")
