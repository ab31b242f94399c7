"""Correct attention, written the ways people write it: the tolerance model must accept every one.

Each variant computes x -> q, k, v -> scores -> scaled -> weights -> out in a dtype, storing each
step's result in that dtype and computing inside a step in float32 for float16 and bfloat16 (as the
frameworks judged here do). They differ where correct code differs: the order of every sum (BLAS,
einsum, sequential left to right and right to left without fused multiply-add, pairwise), the
softmax (subtracting the row's max, not subtracting it where exp cannot overflow, through
log-sum-exp), and torch's own operators (`x @ W`, `torch.einsum`, `F.linear`, SDPA's math path).
Each takes (x_q, x, w_query, w_key, w_value, hidden, dtype): queries from x_q [T, D], keys and values
from x [S, D], float64 arrays holding the dtype's numbers; `hidden` [T, S] is True where a key is
hidden (a causal mask is part of it), and no row hides every key.
"""

import contextlib
import inspect
import sys
import types

import numpy as np

from attention_conformance import remembered
from attention_conformance.adapters import reference
from attention_conformance.contract.ops import CONTRACT
from attention_conformance.dtypes import DTYPES, np_dtype


def _accumulate(dtype):
    return np.float32 if dtype in ("float16", "bfloat16") else np_dtype(dtype).type


def _store(a, dtype):
    return np.asarray(a).astype(np_dtype(dtype)).astype(np.float64)


# --- sums in different orders, in the accumulation dtype -------------------------------------------


def blas(a, b):
    return a @ b


def einsum(a, b):
    return np.einsum("...ij,...jk->...ik", a, b, optimize=False)


def _sequential(a, b, order):
    acc = np.zeros(np.broadcast_shapes(a.shape[:-1] + (1,), b.shape[:-2] + (1, b.shape[-1])), dtype=a.dtype)
    for j in order:
        product = a[..., :, j : j + 1] * b[..., j : j + 1, :]  # rounded on its own: no fused multiply-add
        acc = acc + product
    return acc


def left_to_right(a, b):
    return _sequential(a, b, range(a.shape[-1]))


def right_to_left(a, b):
    return _sequential(a, b, reversed(range(a.shape[-1])))


def fused(a, b):
    """Sequential, left to right, each step a fused multiply-add: the product unrounded, one rounding per step. A
    float32 product is exact in float64; a float64 one is carried in the x87's extended precision, nearer to fused
    than two roundings, and not exact (NumPy has no fma)."""
    wide = np.float64 if a.dtype == np.float32 else np.longdouble
    acc = np.zeros(np.broadcast_shapes(a.shape[:-1] + (1,), b.shape[:-2] + (1, b.shape[-1])), dtype=a.dtype)
    for j in range(a.shape[-1]):
        step = acc.astype(wide) + a[..., :, j : j + 1].astype(wide) * b[..., j : j + 1, :].astype(wide)
        acc = step.astype(a.dtype)
    return acc


def pairwise(a, b):
    products = a[..., :, :, None] * b[..., None, :, :]  # [.., M, K, N]
    while products.shape[-2] > 1:
        half = products.shape[-2] // 2
        paired = products[..., :half, :] + products[..., half : 2 * half, :]
        products = np.concatenate([paired, products[..., 2 * half :, :]], axis=-2)
    return products[..., 0, :]


MATMULS = {"blas": blas, "einsum": einsum, "left_to_right": left_to_right, "right_to_left": right_to_left}
MATMULS["pairwise"] = pairwise


# --- softmax, in the accumulation dtype --------------------------------------------------------------


def softmax_max(z, hidden, total):
    filled = np.where(hidden, -np.inf, z)
    e = np.exp(filled - filled.max(axis=-1, keepdims=True))
    return e / total(e)


def softmax_no_max(z, hidden, total):
    """Only where exp cannot overflow: the caller checks."""
    e = np.where(hidden, 0, np.exp(np.where(hidden, 0, z)))
    return e / total(e)


def softmax_log_sum_exp(z, hidden, total):
    filled = np.where(hidden, -np.inf, z)
    top = filled.max(axis=-1, keepdims=True)
    return np.exp(filled - (top + np.log(total(np.exp(filled - top)))))


def total_numpy(e):
    return e.sum(axis=-1, keepdims=True)


def total_sequential(e):
    return np.cumsum(e, axis=-1)[..., -1:]


SOFTMAXES = {"max": softmax_max, "no_max": softmax_no_max, "log_sum_exp": softmax_log_sum_exp}
TOTALS = {"numpy_sum": total_numpy, "sequential_sum": total_sequential}


# Where the scale 1/sqrt(H) is applied: on the scores, or folded into q, into k, or split as H**-1/4 on both (ONNX's
# route against overflow), each factor a number of the dtype.
SCALE_ON = {"q": (-0.5, 0.0), "k": (0.0, -0.5), "both": (-0.25, -0.25)}


def numpy_attention(x_q, x, w_query, w_key, w_value, hidden, dtype, matmul, softmax, total, scale_on="scores"):
    """{"scores", "weights", "out"} in dtype, each step stored; `scale_on` one of SCALE_ON folds the scale in before the
    product."""
    acc = _accumulate(dtype)
    H = w_query.shape[-1]

    def mm(a, b):
        return _store(matmul(a.astype(acc), b.astype(acc)), dtype)

    def folded(a, power):
        return a if power == 0 else _store(a.astype(acc) * _store(float(H) ** power, dtype).astype(acc), dtype)

    q, k, v = mm(x_q, w_query), mm(x, w_key), mm(x, w_value)
    if scale_on in SCALE_ON:
        on_q, on_k = SCALE_ON[scale_on]
        scaled = mm(folded(q, on_q), np.swapaxes(folded(k, on_k), -1, -2))
        scores = mm(q, np.swapaxes(k, -1, -2))
    else:
        scores = mm(q, np.swapaxes(k, -1, -2))
        scaled = _store(scores.astype(acc) / np.sqrt(acc(H)), dtype)
    weights = _store(softmax(scaled.astype(acc), hidden, total), dtype)
    return {"scores": scores, "weights": weights, "out": mm(weights, v)}


def numpy_variants(no_max_safe):
    """{name: attention(x_q, x, w_query, w_key, w_value, hidden, dtype)} over NumPy's orders and softmaxes."""
    found = {}
    for m, matmul in MATMULS.items():
        found[f"numpy {m}"] = lambda *a, matmul=matmul: numpy_attention(*a, matmul, softmax_max, total_numpy)
    for s, softmax in SOFTMAXES.items():
        if s == "no_max" and not no_max_safe:
            continue
        for t, total in TOTALS.items():
            found[f"numpy softmax {s} {t}"] = lambda *a, softmax=softmax, total=total: numpy_attention(
                *a, left_to_right, softmax, total
            )
    for on in SCALE_ON:
        found[f"numpy scale folded into {on}"] = lambda *a, on=on: numpy_attention(
            *a, blas, softmax_max, total_numpy, on
        )
    return found


def torch_variants():
    """{name: attention(...)} with torch's own operators in the dtype, or {} without torch."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return {}

    def run(body):
        def attention(x_q, x, w_query, w_key, w_value, hidden, dtype):
            t = lambda a: torch.tensor(a).to(getattr(torch, dtype))  # noqa: E731 - five conversions
            with torch.no_grad():
                result = body(t(x_q), t(x), t(w_query), t(w_key), t(w_value), torch.tensor(hidden), w_query.shape[-1])
            return {n: r.to(torch.float64).numpy() for n, r in result.items()}

        return attention

    def textbook(project):
        def body(x_q, x, wq, wk, wv, hidden, H):
            q, k, v = project(x_q, wq), project(x, wk), project(x, wv)
            scores = q @ k.transpose(-1, -2)
            weights = torch.softmax((scores / H**0.5).masked_fill(hidden, float("-inf")), dim=-1)
            return {"scores": scores, "weights": weights, "out": weights @ v}

        return body

    def sdpa(x_q, x, wq, wk, wv, hidden, H):
        q, k, v = x_q @ wq, x @ wk, x @ wv
        return {"out": F.scaled_dot_product_attention(q, k, v, attn_mask=~hidden)}

    return {
        "torch x @ W": run(textbook(lambda x, w: x @ w)),
        "torch einsum": run(textbook(lambda x, w: torch.einsum("...td,dh->...th", x, w))),
        "torch F.linear": run(textbook(lambda x, w: F.linear(x, w.T))),
        "torch SDPA": run(sdpa),
    }


# --- the scale step alone (the contract's `scale`: scores given, scaled by 1/sqrt(d_k)), the ways kernels write it ----
# Each takes the scores (float64 arrays holding the dtype's numbers), d_k and the dtype, and returns the scaled scores
# stored in the dtype, computed in the accumulation dtype (float32 for the half types) unless it says otherwise.


def _in(dtype, value):
    return _accumulate(dtype)(value)


def _one_ulp_off(a, dtype):
    """Each nonzero element one unit in the last place of the dtype away from zero (tests/mutants/_one_ulp.py)."""
    held = np.asarray(a).astype(np_dtype(dtype))
    return np.where(held == 0, held, np.nextafter(held, np.copysign(np.inf, held).astype(held.dtype))).astype(
        np.float64
    )


SCALES = {
    # torch's `scores / math.sqrt(d_k)`, NumPy's with a Python float: the root rounded to the dtype, then divided
    "divide by the rounded root": lambda s, d, t: _store(s.astype(_accumulate(t)) / _in(t, np.sqrt(d)), t),
    # the same in float64, stored once: a double rounding
    "divide in float64": lambda s, d, t: _store(s / np.sqrt(d), t),
    # a kernel's scale factor computed once in float64 and rounded, each score multiplied by it
    "multiply by the rounded reciprocal": lambda s, d, t: _store(s.astype(_accumulate(t)) * _in(t, 1 / np.sqrt(d)), t),
    # the root and then its reciprocal, each rounded: three roundings in all
    "multiply by the reciprocal of the rounded root": lambda s, d, t: _store(
        s.astype(_accumulate(t)) * (_in(t, 1) / _in(t, np.sqrt(d))), t
    ),
    # a library rsqrt accurate to one ULP, not correctly rounded
    "multiply by an rsqrt one ULP off": lambda s, d, t: _store(
        s.astype(_accumulate(t)) * np.nextafter(_in(t, 1 / np.sqrt(d)), _accumulate(t)(np.inf)), t
    ),
    # the factor kept in the half type itself (a kernel's scalar argument in the tensor's dtype)
    "multiply by the reciprocal held in the dtype": lambda s, d, t: _store(
        s.astype(_accumulate(t)) * _store(1 / np.sqrt(d), t).astype(_accumulate(t)), t
    ),
    # the built-in adapters' one-ULP-off wrong adapters are expected to pass: a result one ULP from a correct one
    "divide, then one ULP off": lambda s, d, t: _one_ulp_off(
        _store(s.astype(_accumulate(t)) / _in(t, np.sqrt(d)), t), t
    ),
}


# --- every op: the reference's own steps, each stored in the dtype, computed the ways kernels compute them ------------
# The reference (adapters/reference/) computes every op from a few steps (shared.py: mm, fsum, exp, tanh). Run with its
# step inputs rounded to the dtype (rounding_to) and those steps computed in the accumulation dtype in another order,
# it is a correct implementation of every op at once: fuzz judges it as it judges a framework
# (tests/run/test_false_alarms_ops.py).


def _sequential_sum(a, axis=-1, keepdims=False):
    return np.take(np.cumsum(a, axis=axis), [-1], axis=axis) if keepdims else np.take(np.cumsum(a, axis=axis), -1, axis)


def _as_computed(a, dtype):
    return a


# way -> (product, sum, exp, tanh, finish): the four on arrays of the accumulation dtype, finish on each float output
# stored in its dtype. The last way stands for a kernel whose last step is faithful, not correctly rounded (a
# reciprocal, an rsqrt, a library's exp): either neighbour of a correct result, here always the one away from zero.
OP_WAYS = {
    "BLAS products, NumPy's sums and exp": (blas, np.sum, np.exp, np.tanh, _as_computed),
    "sequential products and sums, right to left": (right_to_left, _sequential_sum, np.exp, np.tanh, _as_computed),
    "pairwise products, NumPy's sums": (pairwise, np.sum, np.exp, np.tanh, _as_computed),
    "fused multiply-add products, left to right": (fused, _sequential_sum, np.exp, np.tanh, _as_computed),
    "BLAS, every result one ULP off": (blas, np.sum, np.exp, np.tanh, lambda a, d: _one_ulp_off(a, d).astype(a.dtype)),
}


def op_variant(way):
    """An adapter (a namespace with DTYPES and every op of the reference) computing each op the `way` OP_WAYS names, in
    the dtype of its inputs."""
    product, total, exponential, hyperbolic, finish = OP_WAYS[way]
    modules = [
        m for n, m in list(sys.modules.items()) if n == reference.__name__ or n.startswith(reference.__name__ + ".")
    ]

    def steps(dtype):
        acc = _accumulate(dtype)

        def mm(a, b):
            a, b = (_store(x, dtype).astype(acc) for x in (a, b))
            if np.ndim(b) == 1:
                return mm(a, b[:, None])[..., 0]
            if np.ndim(a) == 1:
                return mm(a[None, :], b)[..., 0, :]
            return product(a, b).astype(np.float64)

        def fsum(a, axis=-1, keepdims=False):
            return total(np.asarray(a).astype(acc), axis=axis, keepdims=keepdims).astype(np.float64)

        def elementwise(function):
            return lambda a: function(np.asarray(a).astype(acc)).astype(np.float64)

        return {"mm": mm, "fsum": fsum, "exp": elementwise(exponential), "tanh": elementwise(hyperbolic)}

    @contextlib.contextmanager
    def computing(dtype):
        replaced = steps(dtype)
        saved = [(m, n, getattr(m, n)) for m in modules for n in replaced if hasattr(m, n)]
        remembered.forget()  # the oracle's remembered answers are not this adapter's, nor its answers the oracle's
        try:
            for m, n, _ in saved:
                setattr(m, n, replaced[n])
            with reference.rounding_to(np_dtype(dtype)):
                yield
        finally:
            for m, n, original in saved:
                setattr(m, n, original)
            remembered.forget()

    def stored(value, dtype):
        if isinstance(value, dict):  # round_trip is weights read back: no step to round (as tests/mutants/_one_ulp.py)
            return {k: v if k == "round_trip" else stored(v, dtype) for k, v in value.items()}
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            return finish(value.astype(np_dtype(dtype)), dtype)
        return value

    def wrap(function):
        def wrapped(*args, **kwargs):
            given = [*args, *kwargs.values()]
            floats = [
                a for a in given if isinstance(a, np.ndarray) and (a.dtype.kind == "f" or a.dtype.name == "bfloat16")
            ]
            dtype = floats[0].dtype.name if floats else "float64"
            with computing(dtype):
                return stored(function(*args, **kwargs), dtype)

        wrapped.__signature__ = inspect.signature(function)
        return wrapped

    variant = types.SimpleNamespace(DTYPES=DTYPES, NOT_APPLICABLE={})
    for name in CONTRACT:
        if hasattr(reference, name):
            setattr(variant, name, wrap(getattr(reference, name)))
    return variant
