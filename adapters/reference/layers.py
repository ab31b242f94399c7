"""The layers checkpoints load into: the heads convention with a bias on every projection, and the layers' defaults."""

import numpy as np

from attention_conformance import ports, sides

from .documents import attention, blend, initial_weights, project, softmax, transposed_matmul
from .heads import _future, _masked_head, grouped_attention
from .shared import _f64, _zeros, fsum, mm


def attention_module(
    x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, causal, layer, checkpoint
):
    """A framework's attention layer: the heads convention with a bias on every projection. The oracle holds the weights
    in its own form, so `checkpoint` (the layout they were saved in) changes nothing here; round_trip is those weights
    as one vector. `layer` "mha_averaged" returns the weights averaged over heads, as nn.MultiheadAttention does by
    default."""
    T = np.shape(x)[-2]
    hidden = _future(T) if causal else np.zeros((T, T), dtype=bool)
    weights, context, own = _layer(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, hidden)
    return {
        "context": context,
        "weights": fsum(weights, axis=-3) / num_heads if layer == "mha_averaged" else weights,
        "round_trip": ports.flat(ports.reference_weights(*own)),
    }


def layer_mask(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, mask):
    """The layer of attention_module with a mask (True = hidden, [B, T, S]) on every head."""
    hidden = np.asarray(mask, dtype=bool)
    return _layer(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, hidden)[1]


def layer_key_padding(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, padding, causal):
    """The same layer with padded keys (`padding` [B, S], True = padded) hidden from every query, and the future too
    when causal: the [B, T, S] mask a user would otherwise build by hand."""
    hidden = np.asarray(padding, dtype=bool)[..., None, :]  # (B, 1, S): the same keys hidden from every query
    if causal:
        hidden = hidden | _future(np.shape(x)[-2])
    return _layer(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, hidden)[1]


def _layer(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, hidden):
    x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out = _f64(
        x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out
    )
    H = w_query.shape[-1] // num_heads
    queries, keys, values = project(x, w_query) + b_query, project(x, w_key) + b_key, project(x, w_value) + b_value
    T = x.shape[-2]
    weights = _zeros(x.shape[:-2] + (num_heads, T, T), x)  # (B, N, T, S)
    merged = _zeros(x.shape[:-1] + (num_heads * H,), x)  # (B, T, N*H): heads side by side
    for n in range(num_heads):  # head n is columns n*H:(n+1)*H; one (T, T) at a time keeps GPT-2's shape small
        q, k, v = (t[..., n * H : (n + 1) * H] for t in (queries, keys, values))
        weights[..., n, :, :], merged[..., n * H : (n + 1) * H] = _masked_head(q, k, v, hidden)  # one mask, every head
    return weights, mm(merged, w_out) + b_out, (w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)


def layer_defaults(d_in, num_heads, seed):
    """The textbook's layer: SelfAttention_v2 (qkv_bias=False, no dropout), weights per head, and
    nn.Linear's U(-1/sqrt(d_in), 1/sqrt(d_in)) initialisation, the document's v2."""
    w_query = initial_weights(d_in, d_in, "v2", seed)["w_query"].T
    return {"bias": False, "dropout": 0.0, "averaged_weights": False, "w_query": w_query}


def grouped_attention_layer(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    return grouped_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal)


def attention_layer(x, w_query, w_key, w_value):
    """A library's attention layer fed the projections: it should compute scaled attention (the other side of
    sides.attention_layer_scale, keras.layers.Attention's default, leaves the scores unscaled)."""
    if sides.of("attention_layer_scale") == "unscaled":
        values = project(x, w_value)
        return blend(softmax(transposed_matmul(project(x, w_query), project(x, w_key))), values)
    return attention(x, w_query, w_key, w_value)["context"]
