"""Helpers for the tests of `explain` (tests/tools/explain/): a file written and judged in-process."""

import numpy as np

from attention_conformance.dtypes import np_dtype
from attention_conformance.run import tolerance_model
from attention_conformance.tools.examples import _attention
from attention_conformance.tools.explain import command


def explained(tmp_path, name="case", **arrays):
    """(exit code, every line explain printed) for FILE.npz holding `arrays`."""
    path = tmp_path / f"{name}.npz"
    np.savez(path, **arrays)
    lines = []
    code = command.explain(path, out=lines.append, err=lines.append)
    return code, "\n".join(lines)


def causal_arrays(T, S, N, K, H, seed=0):
    """q, k, v of a causal attention with N query heads over K K/V heads, and its float32 result."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, N, T, H)).astype(np.float32)
    k, v = (rng.standard_normal((1, K, S, H)).astype(np.float32) for _ in range(2))
    hidden = tolerance_model.hidden_keys(T, S, causal=True)
    shared = [np.repeat(t, N // K, axis=1) for t in (k, v)]
    out = _attention(q, *shared, "float32", hidden=hidden)
    return dict(q=q, k=k, v=v, out=out.astype(np.float32), causal=np.array(True), num_kv_heads=np.array(K))


def decode_arrays(S, mistake=None, dtype="bfloat16"):
    """One query over S keys, 8 heads over 2 K/V heads, head size 64, in `dtype` (inputs and result stored in it),
    with a `mistake` a kernel makes: "tiled K/V heads" (query head n reads K/V head n % 2), "last keys dropped"."""
    arrays = causal_arrays(1, S, 8, 2, 64, seed=3)
    q, k, v = (arrays[n] for n in "qkv")
    if dtype == "bfloat16":
        q, k, v = (t.astype(np_dtype("bfloat16")).astype(np.float32) for t in (q, k, v))
    heads = np.arange(8) % 2 if mistake == "tiled K/V heads" else np.arange(8) // 4
    kept = S - S // 16 if mistake == "last keys dropped" else S
    out = _attention(q, k[:, heads, :kept], v[:, heads, :kept], "float32")
    out = out.astype(np_dtype(dtype)).astype(np.float32)
    return dict(q=q, k=k, v=v, out=out, num_kv_heads=np.array(2), dtype=np.array(dtype), causal=np.array(True))


def qkv_arrays():
    """q [2, 3, 6, 8], k and v [2, 3, 9, 8]: two sentences, three heads, six queries over nine keys, float32."""
    rng = np.random.default_rng(7)
    return tuple(rng.standard_normal(shape).astype(np.float32) for shape in ((2, 3, 6, 8), (2, 3, 9, 8), (2, 3, 9, 8)))


def float32_stages(q, k, v, hidden, cap=None, bias=None, bias_first=False):
    """Attention in float32 as a kernel writes it, every stage kept: scaled, capped, masked (-inf where hidden),
    weights, out. `bias_first` adds the bias before the cap."""
    scaled = q @ np.swapaxes(k, -1, -2) * np.float32(1 / np.sqrt(q.shape[-1]))
    capped = scaled + bias if bias is not None and bias_first else scaled
    if cap:
        capped = np.tanh(capped / np.float32(cap)) * np.float32(cap)
    logits = capped + bias if bias is not None and not bias_first else capped
    masked = np.where(hidden, np.float32(-np.inf), logits).astype(np.float32)
    row_max = masked.max(axis=-1, keepdims=True)
    e = np.exp(masked - np.where(np.isneginf(row_max), 0, row_max))
    total = e.sum(axis=-1, keepdims=True)
    weights = (e / np.where(total == 0, 1, total)).astype(np.float32)
    found = dict(scaled=scaled, capped=capped, masked=masked, weights=weights, out=weights @ v)
    return {name: np.asarray(a, np.float32) for name, a in found.items()}
