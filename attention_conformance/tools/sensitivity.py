"""How small an error of rounding's shape the tolerance model names, beside flash-attention's rule on the same inputs:
`attention-conformance sensitivity [--seed S] [--json PATH]` (NumPy only; issue 74, docs/tolerance-model.md).

For each family and shape, q, k and v standard normal in the dtype (1 batch, 2 heads), an error of one of three shapes
a real kernel's rounding takes is injected, scaled by k, into the exact output (exact + k d):

  accumulator   the blend's sums kept in the dtype, left to right: each product w_j v_j rounded, each partial sum
  scale         the scores scaled by 1/sqrt(H) rounded to the dtype, the rest exact (0 where H is a power of 4)
  softmax       exp(s - max) stored in the dtype, summed left to right in it, each weight divided and stored in it

and the smallest k each rule names is found:

  the model's   min over elements of allowed / |d| (tolerance_model.allowed: 2 B + E + one ULP; `run`, `fuzz` and
                `explain` judge by it, so one figure stands for the three)
  flash's       (2 max |plain - exact| + atol) / max |d|, flash-attention's test rule: twice the error of the
                reference computed in the dtype (the plain computation, every step stored in it), plus
                atol = 2 max |(out + 0.3) - 0.3 - out| in the dtype

ratio = the model's k / flash's k: above 1 the model lets that shape grow further than flash's rule does."""

import json
import math

import numpy as np

from attention_conformance import writing
from attention_conformance.adapters import reference
from attention_conformance.dtypes import np_dtype
from attention_conformance.run import tolerance_model

DTYPES = ("float16", "bfloat16", "float32")
SHAPES = {"short": (6, 6, 4), "square": (128, 128, 128), "long row": (16, 2048, 64), "large head": (16, 513, 256)}
FAMILIES = ("plain", "causal", "window", "softcap", "sinks", "alibi")
HEADS = 2


def _family(name, T, S):
    """(hidden [T, S], attend's keyword arguments) of a family: causal masks bottom-right aligned, as the spec's."""
    causal = tolerance_model.hidden_keys(T, S, causal=True)
    if name == "plain":
        return np.zeros((T, S), dtype=bool), {}
    if name == "causal":
        return causal, {}
    if name == "window":
        return tolerance_model.hidden_keys(T, S, causal=True, window=max(2, S // 8)), {}
    if name == "softcap":
        return causal, {"cap": 2.0}
    if name == "sinks":
        return causal, {"sinks": np.array([0.5, -1.0])}
    distance = np.abs(np.arange(T)[:, None] + S - T - np.arange(S)[None, :])
    return causal, {"bias": -reference.alibi_slopes(HEADS)[:, None, None] * distance}


def _seq_sum(terms, dtype):
    """Left to right along the last axis, each partial sum rounded to dtype."""
    total = np.zeros(terms.shape[:-1], dtype=dtype)
    for j in range(terms.shape[-1]):
        total = (total.astype(np.float64) + terms[..., j].astype(dtype).astype(np.float64)).astype(dtype)
    return total.astype(np.float64)


def _injected(shape, dtype, q, k, v, hidden, extra, exact):
    kind = np_dtype(dtype)
    if shape == "accumulator":
        products = exact["weights"][..., :, :, None] * v[..., None, :, :]  # [.., T, S, H]
        return _seq_sum(np.swapaxes(products, -1, -2), kind)
    if shape == "scale":
        rounded = float(np.float64(1 / math.sqrt(q.shape[-1])).astype(kind))
        return tolerance_model.attend(q, k, v, hidden, scale=rounded, **extra)["out"]
    logits = exact["masked"]
    if "sinks" in extra:
        sink = np.broadcast_to(extra["sinks"][:, None, None], logits.shape[:-1] + (1,))
        logits = np.concatenate([logits, sink], axis=-1)
    with np.errstate(invalid="ignore"):
        shifted = (logits - logits.max(axis=-1, keepdims=True)).astype(kind)
    terms = np.exp(shifted.astype(np.float64)).astype(kind).astype(np.float64)
    weights = (terms / _seq_sum(terms, kind)[..., None]).astype(kind).astype(np.float64)[..., : v.shape[-2]]
    return weights @ v


def flash_bound(dtype, exact, plain):
    """flash-attention's test rule: twice the plain computation's largest error, plus 2 max |(out + 0.3) - 0.3 - out|
    in the dtype."""
    kind, exact = np_dtype(dtype), np.asarray(exact, dtype=np.float64)
    stored = exact.astype(kind)
    atol = 2 * float(np.max(np.abs(((stored + kind.type(0.3)) - kind.type(0.3)).astype(np.float64) - exact)))
    return 2 * float(np.max(np.abs(np.asarray(plain, dtype=np.float64) - exact))) + atol


def measure(family, shape_name, dtype, seed):
    """{shape: (the model's k, flash's k)} for one family, shape and dtype; None where the shape injects nothing."""
    T, S, H = SHAPES[shape_name]
    rng = np.random.default_rng([seed, FAMILIES.index(family), list(SHAPES).index(shape_name)])
    kind = np_dtype(dtype)
    q, k, v = (rng.standard_normal((1, HEADS, n, H)).astype(kind).astype(np.float64) for n in (T, S, S))
    hidden, extra = _family(family, T, S)
    exact = tolerance_model.attend(q, k, v, hidden, **extra)
    plain = tolerance_model.attend(q, k, v, hidden, rounding=dtype, **extra)["out"]
    derived = tolerance_model.bound(dtype, lambda q, k, v: tolerance_model.attend(q, k, v, hidden, **extra), q, k, v)
    out = exact["out"]
    allowed = tolerance_model.allowed(dtype, out, plain, derived["out"], 2)
    flash = flash_bound(dtype, out, plain)
    found = {}
    for shape in ("accumulator", "scale", "softmax"):
        d = np.abs(_injected(shape, dtype, q, k, v, hidden, extra, exact) - out)
        nonzero = d > 0
        if not nonzero.any():
            found[shape] = None
            continue
        found[shape] = (float(np.min(allowed[nonzero] / d[nonzero])), flash / float(d.max()))
    return found


def _cell(pair):
    if pair is None:
        return "exact"
    ours, flash = pair
    return f"{ours:.3g} / {flash:.3g} ({ours / flash:.2g}x)"


def main(seed=0, json_path=None, families=None, out=print):
    rows = []
    out("| family | T x S x H | dtype | accumulator in the dtype | scale rounded | softmax in the dtype |")
    out("|---|---|---|---|---|---|")
    for family in families or FAMILIES:
        for shape_name, (T, S, H) in SHAPES.items():
            for dtype in DTYPES:
                found = measure(family, shape_name, dtype, seed)
                rows.append(dict(family=family, shape=[T, S, H], dtype=dtype, found=found))
                cells = " | ".join(_cell(found[s]) for s in ("accumulator", "scale", "softmax"))
                out(f"| {family} | {T} x {S} x {H} | {dtype} | {cells} |")
    ratios = [p[0] / p[1] for r in rows for p in r["found"].values() if p is not None]
    out(
        f"\nthe model's k / flash's k over {len(ratios)} cells: median {np.median(ratios):.3g}, "
        f"largest {max(ratios):.3g}, smallest {min(ratios):.3g}"
    )
    if json_path:
        writing.whole(json_path, json.dumps({"seed": seed, "rows": rows}, indent=1).encode(), "--json")
    return 0
