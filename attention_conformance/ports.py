"""Weight porting between the attention layers people load checkpoints into: NumPy only.

One attention layer's weights in the reference's own form are eight arrays (E = embed width,
N heads, head_dim = E / N; `x @ W` layout, head n owns columns n*head_dim:(n+1)*head_dim):

    w_query, w_key, w_value, w_out  [E, E]      b_query, b_key, b_value, b_out  [E]

and the layer computes  concat_n(softmax(q_n k_n^T / sqrt(head_dim)) v_n) @ w_out + b_out
with q = x @ w_query + b_query (k and v alike). Each layout below is how one framework's layer (or
GPT-2's checkpoint) stores those numbers, keyed by that framework's own parameter names:

    torch   nn.MultiheadAttention state_dict: in_proj_weight [3E, E] (q, k, v stacked, each
            transposed: nn.Linear's [out, in]), in_proj_bias [3E], out_proj.weight [E, E]
            (transposed), out_proj.bias [E]
    keras   keras.layers.MultiHeadAttention: query|key|value/kernel [E, N, head_dim],
            query|key|value/bias [N, head_dim], attention_output/kernel [N, head_dim, E],
            attention_output/bias [E]
    flax    flax.nnx.MultiHeadAttention: query|key|value/kernel [E, N, head_dim],
            query|key|value/bias [N, head_dim], out/kernel [N, head_dim, E], out/bias [E]
    gpt2    GPT-2's Conv1D (input-major, no transpose): c_attn.weight [E, 3E] (q, k, v side by
            side along the last axis), c_attn.bias [3E], c_proj.weight [E, E], c_proj.bias [E]

A checkpoint ported from one framework to another is `port(checkpoint, "torch", "keras", N)`:
from the source layout to the reference form, then to the target. Every function is exact (a
reshape, a transpose, a split or a concatenation: no arithmetic), so a round trip is the identity.
No framework is imported here: every environment, and a user's own script, can port any pair.
"""

import numpy as np

REFERENCE = ("w_query", "w_key", "w_value", "w_out", "b_query", "b_key", "b_value", "b_out")
LAYOUTS = ("reference", "torch", "keras", "flax", "gpt2")
_QKV = ("query", "key", "value")
_OUTPUT = {"keras": "attention_output", "flax": "out"}


class PortError(ValueError):
    pass


def reference_weights(w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out):
    """The eight arrays, as an op receives them, in the reference form every function here takes."""
    return dict(zip(REFERENCE, (w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)))


def layer_layout(layer, own):
    """The layout an adapter's `layer` holds: GPT-2's block reads GPT-2's checkpoint as saved; every
    other layer is the framework's own, which stores its weights in the `own` layout."""
    return "gpt2" if layer == "gpt2" else own


def _require(layout, weights, expected):
    """Every parameter the layout names, with its shape: a wrong checkpoint fails here, not later."""
    missing = [k for k in expected if k not in weights]
    extra = [k for k in weights if k not in expected]
    if missing or extra:
        raise PortError(
            f"{layout} checkpoint: expected parameters {sorted(expected)}; missing {missing}, unexpected {extra}"
        )
    for key, shape in expected.items():
        got = np.shape(weights[key])
        if got != shape:
            raise PortError(f"{layout} checkpoint: {key!r} has shape {got}, expected {shape}")


def _embed(layout, weights):
    """E and head_dim as the layout's own shapes say (the reference form needs N given)."""
    key = {"reference": "w_query", "torch": "out_proj.weight", "gpt2": "c_proj.weight"}.get(layout, "query/kernel")
    if key not in weights:
        raise PortError(f"{layout} checkpoint: parameter {key!r} missing (have {sorted(weights)})")
    return np.shape(weights[key])[0]


def layout_shapes(layout, embed_dim, num_heads):
    """{parameter name: shape} of one layer in `layout`."""
    E, N = embed_dim, num_heads
    if E % N:
        raise PortError(f"embed width {E} is not divisible by num_heads {N}")
    hd = E // N
    if layout == "reference":
        return {name: (E, E) if name.startswith("w_") else (E,) for name in REFERENCE}
    if layout == "torch":
        return {
            "in_proj_weight": (3 * E, E),
            "in_proj_bias": (3 * E,),
            "out_proj.weight": (E, E),
            "out_proj.bias": (E,),
        }
    if layout == "gpt2":
        return {"c_attn.weight": (E, 3 * E), "c_attn.bias": (3 * E,), "c_proj.weight": (E, E), "c_proj.bias": (E,)}
    if layout in _OUTPUT:
        out = _OUTPUT[layout]
        shapes = {
            f"{p}/{kind}": (E, N, hd) if kind == "kernel" else (N, hd) for p in _QKV for kind in ("kernel", "bias")
        }
        return shapes | {f"{out}/kernel": (N, hd, E), f"{out}/bias": (E,)}
    raise PortError(f"unknown layout {layout!r}: one of {LAYOUTS}")


def to_layout(layout, weights, num_heads):
    """The reference form's eight arrays as `layout` stores them."""
    E = _embed("reference", weights)
    _require("reference", weights, layout_shapes("reference", E, num_heads))
    w = {k: np.asarray(v) for k, v in weights.items()}
    hd = E // num_heads
    if layout == "reference":
        return dict(w)
    if layout == "torch":
        return {
            "in_proj_weight": np.concatenate([w["w_query"].T, w["w_key"].T, w["w_value"].T]),
            "in_proj_bias": np.concatenate([w["b_query"], w["b_key"], w["b_value"]]),
            "out_proj.weight": w["w_out"].T,
            "out_proj.bias": w["b_out"],
        }
    if layout == "gpt2":
        return {
            "c_attn.weight": np.concatenate([w["w_query"], w["w_key"], w["w_value"]], axis=1),
            "c_attn.bias": np.concatenate([w["b_query"], w["b_key"], w["b_value"]]),
            "c_proj.weight": w["w_out"],
            "c_proj.bias": w["b_out"],
        }
    layout_shapes(layout, E, num_heads)  # names the layout if it is unknown
    ported = {}
    for p in _QKV:  # column n*hd + i of w_query is head n's feature i: a row-major reshape
        ported[f"{p}/kernel"] = w[f"w_{p}"].reshape(E, num_heads, hd)
        ported[f"{p}/bias"] = w[f"b_{p}"].reshape(num_heads, hd)
    out = _OUTPUT[layout]
    return ported | {f"{out}/kernel": w["w_out"].reshape(num_heads, hd, E), f"{out}/bias": w["b_out"]}


def from_layout(layout, checkpoint, num_heads):
    """A `layout` checkpoint's arrays back in the reference form."""
    E = _embed(layout, checkpoint)
    _require(layout, checkpoint, layout_shapes(layout, E, num_heads))
    c = {k: np.asarray(v) for k, v in checkpoint.items()}
    if layout == "reference":
        return dict(c)
    if layout == "torch":
        wq, wk, wv = np.split(c["in_proj_weight"], 3, axis=0)
        bq, bk, bv = np.split(c["in_proj_bias"], 3)
        w_out, b_out = c["out_proj.weight"].T, c["out_proj.bias"]
        wq, wk, wv = wq.T, wk.T, wv.T
    elif layout == "gpt2":
        wq, wk, wv = np.split(c["c_attn.weight"], 3, axis=1)
        bq, bk, bv = np.split(c["c_attn.bias"], 3)
        w_out, b_out = c["c_proj.weight"], c["c_proj.bias"]
    else:
        wq, wk, wv = (c[f"{p}/kernel"].reshape(E, E) for p in _QKV)
        bq, bk, bv = (c[f"{p}/bias"].reshape(E) for p in _QKV)
        out = _OUTPUT[layout]
        w_out, b_out = c[f"{out}/kernel"].reshape(E, E), c[f"{out}/bias"]
    return reference_weights(wq, wk, wv, w_out, bq, bk, bv, b_out)


def port(checkpoint, source, target, num_heads):
    """A checkpoint in `source` layout, converted for a `target` layer."""
    return to_layout(target, from_layout(source, checkpoint, num_heads), num_heads)


def as_saved_by(source, weights, target, num_heads):
    """The reference-form `weights` as a `source` checkpoint stores them, ported for a `target`
    layer: what an adapter loads when a case says the checkpoint came from another framework."""
    return port(to_layout(source, weights, num_heads), source, target, num_heads)


def layer_state(checkpoint, layer, own, num_heads, *weights):
    """What an adapter's `layer` loads in attention_module: the op's eight reference-form arrays (REFERENCE
    order) saved as a `checkpoint` checkpoint, ported to the layout that layer holds (layer_layout)."""
    return as_saved_by(checkpoint, reference_weights(*weights), layer_layout(layer, own), num_heads)


def flat(weights):
    """The reference form's eight arrays as one vector, in REFERENCE order: a round trip's output."""
    return np.concatenate([np.ravel(weights[name]) for name in REFERENCE])
