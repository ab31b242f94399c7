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

import numpy as np

from attention_conformance.dtypes import np_dtype


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


def numpy_attention(x_q, x, w_query, w_key, w_value, hidden, dtype, matmul, softmax, total, scale_first=False):
    """{"scores", "weights", "out"} in dtype, each step stored; `scale_first` folds the scale into q."""
    acc = _accumulate(dtype)
    H = w_query.shape[-1]
    factor = _store(1.0 / np.sqrt(H), dtype).astype(acc)  # the scale as a number of the dtype

    def mm(a, b):
        return _store(matmul(a.astype(acc), b.astype(acc)), dtype)

    q, k, v = mm(x_q, w_query), mm(x, w_key), mm(x, w_value)
    if scale_first:
        scaled = mm(_store(q.astype(acc) * factor, dtype), np.swapaxes(k, -1, -2))
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
    found["numpy scale folded into q"] = lambda *a: numpy_attention(*a, blas, softmax_max, total_numpy, True)
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
