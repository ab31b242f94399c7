"""The model sweep's cases: one op of the contract on a shape drawn from the seed alone (the same cases
on every framework), the inputs rounded to each dtype, and the oracle's exact and plain answers and
derived bound on them (tools/sweep.py measures an adapter against these)."""

import math

import numpy as np

from attention_conformance.adapters import reference
from attention_conformance.contract.ops import OPS
from attention_conformance.dtypes import np_dtype
from attention_conformance.run import tolerance_model

SWEEP_OPS = (
    "masked_attention",
    "causal_attention",
    "decode_attention",
    "grouped_attention",
    "grouped_fused_attention",
    "mask_conventions",
)
MAX_T, MAX_H, MAX_HEADS, MAX_D_IN = 1024, 256, 16, 8
CELLS = 1 << 21  # at most B x N x T x S score entries per case: T = 1024 gets 2 heads, T = 512 gets 8
DECODE_STEPS = 64  # at most this many new tokens in a decoding case (the stepwise path loops in Python)
LARGE_LOGITS = 0.2  # the share of cases whose scaled scores' std is 8..2000 (else 0.05..8)
DEFAULT_EXAMPLES = 150


# --- the cases -----------------------------------------------------------------------------------


def _log_uniform_int(rng, low, high):
    return int(min(high, max(low, round(math.exp(rng.uniform(math.log(low), math.log(high + 0.5)))))))


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def _mask(rng, shape, kind):
    """A [.., T, S] mask, True = hidden, never a row with every key hidden (that is a convention)."""
    T, S = shape[-2:]
    if kind == "one_visible":
        hidden = np.ones(shape, dtype=bool)
        keep = rng.integers(0, S, size=shape[:-1])
        np.put_along_axis(hidden, keep[..., None], False, axis=-1)
        return hidden
    hidden = rng.random(shape) < rng.uniform(0.05, 0.95)
    if kind == "causal_random":
        hidden |= np.arange(S)[None, :] > np.arange(T)[:, None]
        diagonal = np.arange(min(T, S))
        hidden[..., diagonal, diagonal] = False  # each query sees itself
    empty = hidden.all(axis=-1)
    if empty.any():
        keep = rng.integers(0, S, size=shape[:-1])
        rows = np.nonzero(empty)
        hidden[rows + (keep[rows],)] = False
    return hidden


def draw_case(seed, index):
    """Example `index` of `seed`: {"op", "inputs" (float32 arrays, Python scalars, a bool mask),
    "shape" (what to report)}. Depends on the seed and index only, never on the adapter."""
    rng = np.random.default_rng([seed, index])
    op = SWEEP_OPS[int(rng.integers(len(SWEEP_OPS)))]
    T = _log_uniform_int(rng, 1, MAX_T)
    H = _log_uniform_int(rng, 1, MAX_H)
    d_in = int(rng.integers(1, MAX_D_IN + 1))
    grouped = op in ("grouped_attention", "grouped_fused_attention")
    N = int(rng.integers(1, MAX_HEADS + 1)) if grouped else 1
    K = int(rng.choice(_divisors(N)))
    batched = op in ("decode_attention", "grouped_attention", "grouped_fused_attention", "mask_conventions") or (
        op == "causal_attention" and rng.random() < 0.5
    )
    B = int(rng.integers(1, 3)) if batched else 1
    if B * N * T * T > CELLS:  # big shapes: fewer heads and one sequence, so the float64 oracle stays cheap
        B = 1
        allowed = max(1, CELLS // (T * T))
        if N > allowed:
            N = int(rng.integers(1, min(allowed, MAX_HEADS) + 1))
            K = int(rng.choice(_divisors(N)))
    large = rng.random() < LARGE_LOGITS
    sigma = float(
        math.exp(rng.uniform(math.log(8.0), math.log(2000.0)) if large else rng.uniform(math.log(0.05), math.log(8.0)))
    )
    lead = (B,) if batched else ()
    positive = rng.random() < 0.3  # torch.rand-like inputs, as the documents': correlated scores
    x = (rng.random(lead + (T, d_in)) if positive else rng.standard_normal(lead + (T, d_in))).astype(np.float32)
    # x ~ N(0, 1) and W ~ N(0, s^2) make q.k / sqrt(H) ~ N(0, (d_in s^2)^2): s^2 = sigma / d_in
    s = math.sqrt(sigma / d_in)
    inputs = {
        "x": x,
        "w_query": (s * rng.standard_normal((d_in, N * H))).astype(np.float32),
        "w_key": (s * rng.standard_normal((d_in, K * H))).astype(np.float32),
        "w_value": (rng.standard_normal((d_in, K * H)) / math.sqrt(d_in)).astype(np.float32),
    }
    shape = {
        "T": T,
        "S": T,
        "H": H,
        "N": N,
        "K": K,
        "B": B if batched else 0,
        "d_in": d_in,
        "sigma": round(sigma, 4),
        "inputs": "uniform" if positive else "normal",
    }
    if op == "masked_attention":
        kind = str(rng.choice(["random", "one_visible", "causal_random"]))
        inputs["mask"] = _mask(rng, (T, T), kind)
        shape["mask"] = kind
    elif op == "mask_conventions":
        kind = str(rng.choice(["random", "one_visible", "causal_random"]))
        inputs["mask"] = _mask(rng, (B, T, T), kind)
        inputs["api"] = str(rng.choice(["bool", "additive"]))
        inputs["fill"] = str(rng.choice(["neg_inf", "dtype_min"]))
        shape |= {"mask": kind, "api": inputs["api"], "fill": inputs["fill"]}
    elif op == "decode_attention":
        start = T - 1 if rng.random() < 0.5 else T - int(rng.integers(1, min(T, DECODE_STEPS) + 1))
        inputs["start"] = start
        shape |= {"T": T - start, "start": start}
    elif grouped:
        inputs |= {"num_heads": N, "num_kv_heads": K, "causal": bool(rng.random() < 0.5)}
        shape["causal"] = inputs["causal"]
    if op == "causal_attention":
        shape["causal"] = True
    return {"index": index, "op": op, "inputs": inputs, "shape": shape}


def rounded(inputs, dtype):
    """The inputs as the adapter gets them in `dtype` (float32 data cast to it, as the spec's)."""
    return {
        name: value.astype(np_dtype(dtype)) if isinstance(value, np.ndarray) and value.dtype == np.float32 else value
        for name, value in inputs.items()
    }


def _heads(t, n):
    """(.., T, n*H) -> (.., n, T, H): head n is columns n*H:(n+1)*H."""
    return np.swapaxes(t.reshape(t.shape[:-1] + (n, t.shape[-1] // n)), -3, -2)


def oracle(op, inputs, rounding=None):
    """{output: float64 array}: the exact computation (rounding None) or the plain one in `rounding`,
    on these inputs, through tolerance_model.attend."""
    x, wq, wk, wv = (np.asarray(inputs[n], dtype=np.float64) for n in ("x", "w_query", "w_key", "w_value"))
    T = x.shape[-2]
    keys, values = reference.project(x, wk), reference.project(x, wv)
    if op in ("grouped_attention", "grouped_fused_attention"):
        N = inputs["num_heads"]
        q = _heads(reference.project(x, wq), N)
        k, v = (tolerance_model.share_kv_heads(_heads(t, inputs["num_kv_heads"]), N) for t in (keys, values))
        out = tolerance_model.attend(
            q, k, v, tolerance_model.hidden_keys(T, T, causal=inputs["causal"]), rounding=rounding
        )
        return {"heads": out["out"]}
    if op == "decode_attention":
        q = reference.project(x[..., inputs["start"] :, :], wq)
        out = tolerance_model.attend(
            q, keys, values, tolerance_model.hidden_keys(q.shape[-2], T, causal=True), rounding=rounding
        )
        return {"context": out["out"], "stepwise": out["out"]}
    q = reference.project(x, wq)
    mask = inputs.get("mask")
    out = tolerance_model.attend(
        q, keys, values, tolerance_model.hidden_keys(T, T, mask, causal=op == "causal_attention"), rounding=rounding
    )
    if op == "mask_conventions":
        return {"context": out["out"]}
    return {"weights": out["weights"], "context": out["out"]}


def bound(op, inputs, dtype):
    """{output: the derived bound in dtype}, from the reference's own steps on these inputs."""
    try:
        found = tolerance_model.bound(dtype, getattr(reference, op), **inputs)
    except tolerance_model.Overflow:
        return None  # a stored step overflows: skipped, as an overflowing plain output is
    return found if isinstance(found, dict) else {OPS[op][1][0]: found}
