"""MLX: the attention layers checkpoints are loaded into (attention_conformance.ports: every layout).

mlx.nn.MultiHeadAttention holds four nn.Linear: query_proj, key_proj, value_proj, out_proj, each weight [out, in]
(torch's nn.Linear layout). It is torch's nn.MultiheadAttention state with the packed in_proj split in three, so a
checkpoint goes through ports' torch layout.
"""

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_flatten

from attention_conformance import ports

from .shared import _causal_mask, _core, _heads, _masked_weights, _mx, _np

_PROJ = ("query_proj", "key_proj", "value_proj")


def _mlx_state(torch_state):
    """torch nn.MultiheadAttention's state_dict -> mlx.nn.MultiHeadAttention's parameter names."""
    weights = np.split(torch_state["in_proj_weight"], 3)  # [3E, E] -> q, k, v, in that order
    biases = np.split(torch_state["in_proj_bias"], 3)
    state = {f"{p}.weight": w for p, w in zip(_PROJ, weights)} | {f"{p}.bias": b for p, b in zip(_PROJ, biases)}
    return state | {"out_proj.weight": torch_state["out_proj.weight"], "out_proj.bias": torch_state["out_proj.bias"]}


def _torch_state(mlx_state):
    return {
        "in_proj_weight": np.concatenate([mlx_state[f"{p}.weight"] for p in _PROJ]),
        "in_proj_bias": np.concatenate([mlx_state[f"{p}.bias"] for p in _PROJ]),
        "out_proj.weight": mlx_state["out_proj.weight"],
        "out_proj.bias": mlx_state["out_proj.bias"],
    }


def _mha(state, num_heads):
    """mlx.nn.MultiHeadAttention with bias=True (its default is False: a checkpoint with biases needs it)."""
    layer = nn.MultiHeadAttention(state["out_proj.weight"].shape[0], num_heads, bias=True)
    layer.load_weights([(name, _mx(value)) for name, value in state.items()])  # strict: every name and shape
    return layer


def _weights_of(layer, x, mask):
    """The layer returns no attention weights; these are its own projections' (the layer's
    query_proj and key_proj, its scale, the mask it was given), as an MLX user inspects them."""
    queries = _heads(layer.query_proj(x), layer.num_heads)
    keys = _heads(layer.key_proj(x), layer.num_heads)
    attn_scores = queries @ keys.swapaxes(-1, -2) * queries.shape[-1] ** -0.5
    if mask is not None:
        attn_scores = mx.where(mask, -mx.inf, attn_scores)
    return mx.softmax(attn_scores, axis=-1)


def _gpt2_attention(x, state, num_heads, causal):
    """GPT-2's attention block: one packed c_attn projection (Conv1D, input-major: x @ W + b) split into q, k, v."""
    c_attn_w, c_attn_b, c_proj_w, c_proj_b = (
        _mx(state[k]) for k in ("c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias")
    )
    E, T = x.shape[-1], x.shape[-2]
    queries, keys, values = (_heads(t, num_heads) for t in mx.split(x @ c_attn_w + c_attn_b, 3, axis=-1))
    attn_scores = queries @ keys.swapaxes(-1, -2)
    head_dim = E // num_heads
    attn_weights = (
        _masked_weights(attn_scores, keys, _causal_mask(T, T))
        if causal
        else mx.softmax(attn_scores / head_dim**0.5, axis=-1)
    )
    merged = (attn_weights @ values).swapaxes(-3, -2).reshape(x.shape)
    held = {"c_attn.weight": c_attn_w, "c_attn.bias": c_attn_b, "c_proj.weight": c_proj_w, "c_proj.bias": c_proj_b}
    return merged @ c_proj_w + c_proj_b, attn_weights, held


def attention_module(
    x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, causal, layer, checkpoint
):
    if layer not in ("gpt2", "mha"):
        raise NotImplementedError(f"layer={layer} is not applicable here: see NOT_APPLICABLE")
    weights = (w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    state = ports.layer_state(checkpoint, layer, "torch", num_heads, *weights)  # the checkpoint, ported: NumPy
    context, attn_weights, held = _layer_forward(x, state if layer == "gpt2" else _mlx_state(state), num_heads, causal)
    layout = "gpt2" if layer == "gpt2" else "torch"
    saved = ports.from_layout(layout, held if layer == "gpt2" else _torch_state(held), num_heads)
    return {"context": context, "weights": attn_weights, "round_trip": ports.flat(saved)}


@_core
def _layer_forward(x, state, num_heads, causal):
    """The layer loaded with `state` (its own layout: GPT-2's c_attn... or mlx.nn's): context, weights and the
    parameters it holds, in that layout."""
    x = _mx(x)
    if "c_attn.weight" in state:
        context, attn_weights, held = _gpt2_attention(x, state, num_heads, causal)
    else:
        mha = _mha(state, num_heads)
        T = x.shape[-2]
        context = mha(x, x, x, mask="causal" if causal else None)  # the string mask: bottom-right causal
        attn_weights = _weights_of(mha, x, _causal_mask(T, T) if causal else None)
        held = dict(tree_flatten(mha.parameters()))
    return _np(context), _np(attn_weights), {k: _np(v) for k, v in held.items()}


def layer_mask(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, mask):
    weights = (w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    state = _mlx_state(ports.layer_state("reference", "mha", "torch", num_heads, *weights))  # NumPy
    return _layer_mask(x, state, num_heads, mask)


@_core
def _layer_mask(x, state, num_heads, mask):
    mha, x = _mha(state, num_heads), _mx(x)
    return _np(mha(x, x, x, mask=~_mx(mask)[:, None]))  # a boolean mask, True = attend, [B, 1, T, S] for every head


def layer_defaults(d_in, num_heads, seed):
    mx.random.seed(seed)
    layer = nn.MultiHeadAttention(d_in, num_heads)
    state = {k: _np(v) for k, v in tree_flatten(layer.parameters())}
    # No bias by default, no dropout argument at all, and no attention weights returned (so none averaged).
    return {
        "bias": "out_proj.bias" in state,
        "dropout": 0.0,
        "averaged_weights": False,
        "w_query": state["query_proj.weight"].T,
    }
