"""The oracle's arithmetic is the same bytes on every machine (attention_conformance/deterministic.py).

Other machines are emulated on this one with the switches that change kernels: OpenBLAS's core
type and thread count, NumPy's SIMD level, torch's CPU capability. Each setting runs in a fresh
process, since each is read once at import.
"""

import json
import math
import os
import subprocess
import sys
from decimal import Decimal, localcontext
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from attention_conformance import deterministic
from attention_conformance.cases import golden

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = [  # each one changes plain NumPy's float64 results on some machine (module docstring)
    {},
    {"OPENBLAS_CORETYPE": "Haswell"},
    {"OPENBLAS_CORETYPE": "Prescott"},
    {"OPENBLAS_CORETYPE": "Sandybridge"},
    {"OPENBLAS_NUM_THREADS": "1"},
    {"OPENBLAS_NUM_THREADS": "2"},
    {"NPY_DISABLE_CPU_FEATURES": "X86_V4"},
    {"ATEN_CPU_CAPABILITY": "default"},
]


def _label(setting):
    return " ".join(f"{k}={v}" for k, v in setting.items()) or "as-is"


def _run(setting, code):
    env = {k: v for k, v in os.environ.items() if k not in {key for s in SETTINGS for key in s}} | setting
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


# GPT-2 small's shapes: the largest products and softmax rows the oracle computes.
_DIGESTS = """
import hashlib, json, numpy as np
from attention_conformance import deterministic
rng = np.random.default_rng(0)
a, b = rng.uniform(-1, 1, (1024, 768)), rng.uniform(-1, 1, (768, 768))
s = rng.uniform(-30, 0, (4, 1024, 1024))
d = lambda x: hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()
angles = rng.uniform(-8e5, 8e5, 1 << 16)  # RoPE's: up to 131072 positions x frequencies up to 1, and more
ours = [d(deterministic.matmul(a, b)), d(deterministic.exp(s)), d(deterministic.sum(s, axis=-1)),
        d(deterministic.cos_sin(angles)), d(deterministic.tanh(s / 10))]
print(json.dumps({"portable": ours,
                  "numpy": [d(a @ b), d(np.exp(s)), d(s.sum(axis=-1))]}))
"""


@pytest.fixture(scope="module")
def digests():
    return {_label(s): _run(s, _DIGESTS) for s in SETTINGS if "ATEN_CPU_CAPABILITY" not in s}


def test_matmul_exp_and_sum_are_the_same_bytes_under_every_setting(digests):
    assert len({tuple(d["portable"]) for d in digests.values()}) == 1, digests


def test_the_settings_do_change_plain_numpy_here(digests):
    """Without this, the test above could pass because nothing it varies changes anything. BLAS
    varies on every x86 CPU (Prescott's kernel is not the native one); NumPy's own exp only where
    the CPU has AVX-512 for NPY_DISABLE_CPU_FEATURES=X86_V4 to turn off. NumPy's pairwise sum does
    not vary with these settings (measured): deterministic.sum is there so that its order is the suite's,
    not a NumPy release's."""
    matmuls = {d["numpy"][0] for d in digests.values()}
    assert len(matmuls) > 1, digests
    if "X86_V4" in _numpy_simd():
        assert len({d["numpy"][1] for d in digests.values()}) > 1, digests


def _numpy_simd():
    from numpy._core._multiarray_umath import __cpu_features__

    return {"X86_V4"} if __cpu_features__.get("AVX512F") and __cpu_features__.get("AVX512BW") else set()


@pytest.mark.parametrize("setting", SETTINGS, ids=_label)
def test_regenerated_goldens_are_byte_identical_to_the_committed_ones(setting, tmp_path):
    code = (
        f"import json, sys; sys.argv = ['regenerate.py', '--dir', {str(tmp_path)!r}]; sys.path.insert(0, 'golden')\n"
        "import regenerate; code = regenerate.main(sys.argv[1:]); print(json.dumps(code))"
    )
    assert _run(setting, code) == 0
    assert sorted(p.name for p in tmp_path.glob("*.json")) == sorted(p.name for p in golden.GOLDEN_DIR.glob("*.json"))
    for path in sorted(golden.GOLDEN_DIR.glob("*.json")):
        if path.name != golden.MANIFEST:  # the manifest records versions, which may differ
            assert (tmp_path / path.name).read_bytes() == path.read_bytes(), f"{path.name} under {_label(setting)}"


def _exact_product(a, b):
    """a @ b rounded once from the exact rational result."""
    return np.array(
        [[float(sum((Fraction(x) * Fraction(y) for x, y in zip(row, col)), Fraction(0))) for col in b.T] for row in a]
    )


@pytest.mark.parametrize("K", [1, 3, 64, 768])
def test_matmul_is_within_its_stated_bound_of_the_exact_product(K):
    rng = np.random.default_rng(K)
    a, b = rng.standard_normal((5, K)), rng.standard_normal((K, 4))
    a[0] *= 1e-6  # rows of different scales are sliced apart
    b[:, 1] = rng.uniform(0, 1, K).astype(np.float32)  # float32 inputs, as the spec's
    got = deterministic.matmul(a, b)
    exact = _exact_product(a, b)
    scale = np.abs(a).max(axis=1, keepdims=True) * np.abs(b).max(axis=0, keepdims=True)
    bound = 2 * np.spacing(np.abs(exact)) + K * 2.0**-58 * scale  # deterministic.py's docstring
    assert (np.abs(got - exact) <= bound).all()


@pytest.mark.parametrize("scale_a, scale_b", [(1.0, 1.0), (2.0**1000, 1.0), (1.0, 2.0**-1040), (2.0**-600, 2.0**-480)])
def test_matmul_does_not_depend_on_the_order_of_the_terms(scale_a, scale_b):
    """What BLAS kernels change is the order of the sum: permuting K reorders it, and no byte moves,
    near overflow and underflow too."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((5, 256)) * scale_a, rng.standard_normal((256, 4)) * scale_b
    for _ in range(5):
        order = rng.permutation(256)
        assert np.array_equal(deterministic.matmul(a[:, order], b[order]), deterministic.matmul(a, b))
    x = 1.5 * 2.0**1023  # x + x overflows, x + x - x does not
    assert (
        deterministic.matmul([[x, x, -x]], np.ones((3, 1))) == deterministic.matmul([[x, -x, x]], np.ones((3, 1))) == x
    )


def test_a_nan_reaches_only_its_own_row_and_an_inf_its_own_column():
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((8, 300)), rng.standard_normal((300, 6))
    clean = deterministic.matmul(a, b)
    a[0, 0], b[3, 2] = np.nan, np.inf
    dirty = deterministic.matmul(a, b)
    assert np.isnan(dirty[0]).all() and not np.isfinite(dirty[1:, 2]).any()
    assert np.array_equal(
        np.delete(np.delete(dirty, 0, axis=0), 2, axis=1), np.delete(np.delete(clean, 0, axis=0), 2, axis=1)
    )


def test_matmul_follows_numpy_for_vectors_batches_and_broadcasting():
    rng = np.random.default_rng(1)
    for sa, sb in [
        ((3,), (3,)),
        ((3,), (3, 2)),
        ((2, 3), (3,)),
        ((4, 2, 3), (3, 5)),
        ((4, 2, 3), (4, 3, 5)),
        ((2, 0), (0, 3)),
    ]:
        a, b = rng.standard_normal(sa), rng.standard_normal(sb)
        got = deterministic.matmul(a, b)
        assert np.shape(got) == np.shape(a @ b) and np.allclose(got, a @ b, rtol=1e-14, atol=1e-14), (sa, sb)


def test_exp_is_within_two_ulp_and_keeps_the_edges():
    x = np.random.default_rng(2).uniform(-745, 709, 200_000)
    exact = np.array([math.exp(v) for v in x])
    assert (np.abs(deterministic.exp(x) - exact) / np.spacing(exact)).max() <= 2
    edges = deterministic.exp(np.array([-np.inf, -800.0, 0.0, 710.0, np.inf, np.nan]))
    assert edges[:3].tolist() == [0.0, 0.0, 1.0] and np.isinf(edges[3:5]).all() and np.isnan(edges[5])


def _cos_sin_exactly(x):
    """cos and sin of a float64 to 40 digits: reduction by 2 pi in decimals, then their Taylor series."""
    with localcontext() as c:
        c.prec = 60
        two_pi = Decimal("6.28318530717958647692528676655900576839433879875021164194988918461563281257241799726")
        r = Decimal(float(x)) % two_pi
        term, cos, sin, n = Decimal(1), Decimal(0), Decimal(0), 0
        while abs(term) > Decimal("1e-45") or n < 4:
            if n % 2 == 0:
                cos += term if n % 4 == 0 else -term
            else:
                sin += term if n % 4 == 1 else -term
            n += 1
            term = term * r / n
        return float(cos), float(sin)


def test_cos_and_sin_are_within_one_unit_of_the_angle_and_two_ulp_of_themselves():
    """RoPE's angles, from a small one to 8e5 radians: within 2**-52 (|angle| + 1), what elementary.cos_sin says of
    the oracle's own error, and within 2 ULP of the result where the angle is small; beyond 8e5, a clear error."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-4, 4, 300), rng.uniform(-8e5, 8e5, 300), np.arange(64) * math.pi / 4, [0.0]])
    cos, sin = deterministic.cos_sin(x)
    exact = np.array([_cos_sin_exactly(v) for v in x])
    assert (np.abs(cos - exact[:, 0]) <= 2.0**-52 * (np.abs(x) + 1)).all()
    assert (np.abs(sin - exact[:, 1]) <= 2.0**-52 * (np.abs(x) + 1)).all()
    small = np.abs(x) <= 4
    assert (np.abs(cos - exact[:, 0]) / np.spacing(np.abs(exact[:, 0])))[small].max() <= 2
    assert (np.abs(sin - exact[:, 1]) / np.spacing(np.abs(exact[:, 1])))[small & (x != 0)].max() <= 2
    assert np.isnan(deterministic.cos_sin(np.array([np.inf, np.nan]))).all()
    with pytest.raises(ValueError, match="8e5"):
        deterministic.cos_sin(np.array([1e6]))


def test_tanh_is_within_two_ulp_and_keeps_the_edges():
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.uniform(-25, 25, 500), rng.uniform(-1, 1, 500), [0.6249999999, 0.625, 1e-9]])

    def exactly(v):
        with localcontext() as c:
            c.prec = 60
            e = (2 * Decimal(float(v))).exp()
            return float((e - 1) / (e + 1))

    exact = np.array([exactly(v) for v in x])
    assert (np.abs(deterministic.tanh(x) - exact) / np.spacing(np.abs(exact))).max() <= 2
    edges = deterministic.tanh(np.array([0.0, 1e-300, -np.inf, np.inf, 1e10, np.nan]))
    assert edges[:5].tolist() == [0.0, 1e-300, -1.0, 1.0, 1.0] and np.isnan(edges[5])


def test_sum_is_numpys_sum_to_rounding():
    a = np.random.default_rng(3).standard_normal((3, 1001))
    assert np.allclose(deterministic.sum(a, axis=-1), a.sum(axis=-1), rtol=0, atol=1e-13)
    assert deterministic.sum(a, axis=0, keepdims=True).shape == (1, 1001)
    assert deterministic.sum(np.zeros((2, 0))).tolist() == [0.0, 0.0]


@pytest.fixture
def products(monkeypatch):
    """The (a, b) shapes of the slice products deterministic.matmul hands to BLAS."""
    seen, real = [], np.matmul

    def counted(a, b, *args, **kwargs):
        seen.append((np.shape(a), np.shape(b)))
        return real(a, b, *args, **kwargs)

    monkeypatch.setattr(np, "matmul", counted)
    return seen


def test_matmul_multiplies_only_the_slices_that_hold_bits(products):
    """float16 inputs, as the spec's half-precision cases feed the oracle: activations in [-1, 1)
    (one as small as float16 goes, 2**-24) fill two 23-bit slices, weights of GPT-2's scale one,
    so two of the six slice products hold bits (it computed all six). With every bit kept, the
    result is the exact product rounded once."""
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (6, 64)).astype(np.float16).astype(np.float64)
    a[0, 0] = 2.0**-24
    b = rng.uniform(-0.035, 0.035, (64, 5)).astype(np.float16).astype(np.float64)
    got = deterministic.matmul(a, b)
    assert len(products) == 2, products
    assert np.array_equal(got, _exact_product(a, b))


def test_matmul_stops_at_the_last_column_of_a_that_holds_a_number(products):
    """A causal block of attention weights is zero past its last visible key: the products stop
    there, and the result is the same bytes as with the zero columns first (no column skipped),
    which permutes only the order of the sum."""
    rng = np.random.default_rng(8)
    a, b = np.zeros((4, 300)), rng.standard_normal((300, 6))
    a[:, :120] = rng.uniform(0, 1, (4, 120))
    got = deterministic.matmul(a, b)
    assert products and all(shape_a[-1] == 120 and shape_b[-2] == 120 for shape_a, shape_b in products), products
    zeros_first = np.r_[120:300, 0:120]
    assert deterministic.matmul(a[:, zeros_first], b[zeros_first]).tobytes() == got.tobytes()


def _every_slice_product(a, b):
    """deterministic.matmul as first written (issue 26), without the shortcuts that skip all-zero slices and
    trailing all-zero columns of a: the statement the faster one must equal byte for byte."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    K = a.shape[-1]
    bits = (deterministic._MANTISSA - (K - 1).bit_length()) // 2
    count = -(-deterministic._COVERED // bits)

    def slices(x, axis):
        _, e = np.frexp(np.max(np.abs(x), axis=axis, keepdims=True))
        rest, q = np.ldexp(x, -e), []
        for _ in range(count):
            rest = rest * 2.0**bits
            q.append(np.trunc(rest))
            rest = rest - q[-1]
        return q, e

    (a_q, e_a), (b_q, e_b) = slices(a, -1), slices(b, -2)
    pairs = sorted(
        ((p, q) for p in range(count) for q in range(count) if p + q < count), key=lambda pq: -(pq[0] + pq[1])
    )
    total = None
    for p, q in pairs:
        term = np.ldexp(a_q[p] @ b_q[q], -(p + q + 2) * bits)
        total = term if total is None else total + term
    return np.ldexp(total, e_a + e_b)


@pytest.mark.parametrize("seed", range(40))
def test_the_shortcuts_give_the_bytes_of_every_slice_product_with_signed_zeros_in_the_inputs(seed):
    rng = np.random.default_rng(seed)
    M, K, N = rng.integers(1, 9, 3)
    a = rng.uniform(-1, 1, (M, K)) * rng.choice([1.0, 1e-3, 2.0**-40], (M, K))
    b = rng.uniform(-1, 1, (K, N)) * rng.choice([1.0, 1e-3, 2.0**-40], (K, N))
    a[:, rng.integers(0, K + 1) :] = rng.choice([0.0, -0.0])  # trailing zero columns, of either sign
    a[rng.random((M, K)) < 0.2] = -0.0
    b[rng.random((K, N)) < 0.2] = -0.0
    a = a.astype(np.float32).astype(np.float64) if seed % 2 else a  # float32 data: the slices that skip
    assert deterministic.matmul(a, b).tobytes() == _every_slice_product(a, b).tobytes()
    assert deterministic.matmul(-0.0 * np.abs(a), b).tobytes() == _every_slice_product(-0.0 * np.abs(a), b).tobytes()


@pytest.mark.parametrize(
    "shape_a, shape_b",
    [
        ((1, 4, 1, 128), (1, 1, 128, 3000)),
        ((1, 4, 1, 3000), (1, 1, 3000, 64)),
        ((2, 40, 3000), (3000, 64)),
        ((3000, 9), (9, 2)),
        ((2, 3, 40), (2, 40, 2)),
        ((5, 9), (9, 1)),
    ],
    ids=["decode-qk", "decode-wv", "block-wv", "long-a", "batched", "column"],
)
@pytest.mark.parametrize("piece", [1, 7, 1000, deterministic._PIECE])
def test_a_result_smaller_than_an_operand_is_the_bytes_of_every_slice_product(shape_a, shape_b, piece, monkeypatch):
    """Where the result is smaller than an operand (a decode's q k^T and its weights times v, a block's weights times
    v), the larger operand is split and multiplied a piece at a time (deterministic._pieced), along K or its own
    axis: the bytes of every slice product of the whole, whatever the piece, signed zeros and slices that hold bits
    in some pieces only included."""
    monkeypatch.setattr(deterministic, "_PIECE", piece)
    rng = np.random.default_rng(3)
    small = rng.standard_normal(shape_a) * rng.choice([1.0, 2.0**-30], shape_a)  # a second slice in some pieces
    small[..., :1] = -0.0
    for a, b in (
        (rng.standard_normal(shape_a), rng.standard_normal(shape_b)),
        (rng.standard_normal(shape_a).astype(np.float32).astype(np.float64), rng.uniform(0, 1e-3, shape_b)),
        (small, -0.0 * np.abs(rng.standard_normal(shape_b))),
    ):
        assert deterministic.matmul(a, b).tobytes() == _every_slice_product(a, b).tobytes()
        assert deterministic.matmul(b.swapaxes(-1, -2), a.swapaxes(-1, -2)).tobytes() == (
            _every_slice_product(b.swapaxes(-1, -2), a.swapaxes(-1, -2)).tobytes()
        )
