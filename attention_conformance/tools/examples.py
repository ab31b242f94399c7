"""Example files for `attention-conformance explain`, of the kinds issue trackers ask about.

    attention-conformance examples DIR

writes one FILE.npz per EXAMPLES entry into DIR. Each result is computed with NumPy the way a
framework would (in the dtype, or accumulating in float32 as half-precision kernels do), so the
files need no framework. docs/tolerances.md, "Is my difference a bug?", walks through them;
tests/tools/explain/test_explain.py checks that each gets the verdict written here.
"""

import sys
from pathlib import Path

import numpy as np

from attention_conformance.dtypes import np_dtype


def _attention(q, k, v, dtype, accumulate=None, scale=None, hidden=None, fill=-np.inf):
    """softmax(q k^T x scale) v computed in `dtype` (or with sums in `accumulate`, rounded to dtype
    after each step), a mask filled with `fill` before the softmax."""
    work = np_dtype(accumulate or dtype)
    rounded = lambda a: np.asarray(a, dtype=work).astype(np_dtype(dtype)).astype(work)  # noqa: E731 - one step's result
    q, k, v = (np.asarray(t, dtype=work) for t in (q, k, v))
    scores = rounded(q @ np.swapaxes(k, -1, -2) * work.type(scale if scale is not None else 1 / np.sqrt(q.shape[-1])))
    if hidden is not None:
        scores = np.where(hidden, work.type(fill), scores)
    with np.errstate(invalid="ignore"):
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights = rounded(e / e.sum(axis=-1, keepdims=True))
    return (weights @ v).astype(np_dtype(dtype))


def _normal(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np_dtype(dtype))


def _causal_top_left(T, S):
    return np.arange(S)[None, :] > np.arange(T)[:, None]


def _examples():
    rng = np.random.default_rng(2026)
    q, k, v = (_normal(rng, (2, 8, 64, 64), "float32") for _ in range(3))
    yield (
        "sdpa_vs_reference",
        0,
        None,
        "float32 SDPA against its documented reference on normal inputs "
        "(pytorch/pytorch#119188): differences of a few ULP",
        dict(q=q, k=k, v=v, out=_attention(q, k, v, "float32")),
    )
    q16, k16, v16 = (_normal(rng, (1, 4, 256, 64), "float16") for _ in range(3))
    yield (
        "half_backends",
        0,
        None,
        "a float16 kernel accumulating in float32 against a plain float16 one (pytorch/pytorch#133671, "
        "flash against math on CPU)",
        dict(q=q16, k=k16, v=v16, out=_attention(q16, k16, v16, "float16", "float32")),
    )
    qb, kb, vb = (_normal(rng, (1, 2, 128, 128), "float32", 3.0).astype(np_dtype("bfloat16")) for _ in range(3))
    out = _attention(qb, kb, vb, "bfloat16", "float32")
    yield (
        "bf16_large_logits",
        0,
        None,
        "bfloat16 with large logits (scores up to ~100): errors of 1e-2 that are still rounding",
        dict(
            q=qb.astype(np.float32),
            k=kb.astype(np.float32),
            v=vb.astype(np.float32),
            out=out.astype(np.float32),
            dtype=np.array("bfloat16"),
        ),
    )
    qc, kc, vc = (
        _normal(rng, (1, 4, 3, 32), "float32"),
        _normal(rng, (1, 4, 10, 32), "float32"),
        _normal(rng, (1, 4, 10, 32), "float32"),
    )
    yield (
        "causal_decode_top_left",
        1,
        "top-left causal alignment",
        "a causal layer that did not match (NVIDIA/TransformerEngine#267, "
        "Dao-AILab/flash-attention#1128): 3 new queries over 10 cached keys with the mask aligned top-left",
        dict(
            q=qc,
            k=kc,
            v=vc,
            causal=np.array(True),
            out=_attention(qc, kc, vc, "float32", hidden=_causal_top_left(3, 10)),
        ),
    )
    mask = rng.random((64, 64)) < 0.2
    yield (
        "mask_polarity",
        1,
        "inverted mask polarity",
        "a boolean mask passed with the other polarity (True = attend)",
        dict(q=q, k=k, v=v, mask=mask, out=_attention(q, k, v, "float32", hidden=~mask)),
    )
    padded = np.zeros((64, 64), dtype=bool)
    padded[:, 40:] = True
    padded[10] = True  # a query whose every key is hidden
    yield (
        "fully_masked_row",
        1,
        "uniform weights on fully masked rows",
        "a query with every key hidden, filled with the dtype's minimum",
        dict(
            q=q, k=k, v=v, mask=padded, out=_attention(q, k, v, "float32", hidden=padded, fill=np.finfo(np.float32).min)
        ),
    )
    yield (
        "scale_by_head_size",
        1,
        "scores scaled by 1/H",
        "scores divided by H instead of sqrt(H)",
        dict(q=q, k=k, v=v, out=_attention(q, k, v, "float32", scale=1 / 64)),
    )


EXAMPLES = {
    name: (exit_code, difference) for name, exit_code, difference, _, _ in _examples()
}  # the verdict, what explain names


def write(directory):
    directory = Path(directory)
    directory.mkdir(exist_ok=True)
    for name, _, _, what, arrays in _examples():
        np.savez(directory / f"{name}.npz", **arrays)
        print(f"{directory / name}.npz: {what}")


def main(directory):
    """`attention-conformance examples DIR`."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        print(f"error: {directory}: exists and is not a directory", file=sys.stderr)
        return 2
    if not directory.parent.is_dir():
        print(f"error: {directory.parent}: no such directory (DIR is made, its parent must exist)", file=sys.stderr)
        return 2
    write(directory)
    return 0
