"""MLX: past the documents' one head: masks, decoding with a cache, dropout, several heads and grouped heads."""

import math

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from .shared import _causal_mask, _heads, _masked_weights, _mx, _np, _split_heads


def masked_attention(x, w_query, w_key, w_value, mask):
    x = _mx(x)
    queries, keys, values = x @ _mx(w_query), x @ _mx(w_key), x @ _mx(w_value)
    attn_weights = _masked_weights(queries @ keys.swapaxes(-1, -2), keys, _mx(mask))
    return {"weights": _np(attn_weights), "context": _np(attn_weights @ values)}


def causal_attention(x, w_query, w_key, w_value):
    T = np.shape(x)[-2]
    return masked_attention(x, w_query, w_key, w_value, _np(_causal_mask(T, T)))


def _sdpa(queries, keys, values, mask, unbatched):
    out = mx.fast.scaled_dot_product_attention(queries, keys, values, scale=queries.shape[-1] ** -0.5, mask=mask)
    return out[0] if unbatched else out


def mask_conventions(x, w_query, w_key, w_value, mask, api, fill):
    x, hidden = _mx(x), _mx(mask)
    queries, keys, values = (_heads(x @ _mx(w), 1) for w in (w_query, w_key, w_value))
    if api == "bool":  # its boolean mask: True = the key takes part, the suite's opposite
        attn_mask = ~hidden
    else:  # an additive mask in the inputs' dtype
        value = {"neg_inf": -math.inf, "large_negative": -1e9, "dtype_min": float(mx.finfo(x.dtype).min)}[fill]
        attn_mask = mx.where(hidden, mx.array(value, dtype=x.dtype), mx.array(0, dtype=x.dtype))
    attn_mask = attn_mask[:, None] if attn_mask.ndim == 3 else attn_mask  # [B, 1, T, S]: every head
    return _np(_sdpa(queries, keys, values, attn_mask, x.ndim == 2)[..., 0, :, :])


def decode_attention(x, w_query, w_key, w_value, start):
    x, W_query, W_key, W_value = _mx(x), _mx(w_query), _mx(w_key), _mx(w_value)
    keys, values = x @ W_key, x @ W_value
    queries = x[..., start:, :] @ W_query
    context = (
        _masked_weights(queries @ keys.swapaxes(-1, -2), keys, _causal_mask(queries.shape[-2], keys.shape[-2])) @ values
    )
    # Token by token: the cache holds keys and values 0..p-1 and grows by the new token's; its query
    # attends over the whole cache, unmasked, since the future is not there yet.
    k_cache, v_cache, steps = keys[..., :start, :], values[..., :start, :], []
    for p in range(start, x.shape[-2]):
        token = x[..., p : p + 1, :]
        k_cache = mx.concatenate([k_cache, token @ W_key], axis=-2)
        v_cache = mx.concatenate([v_cache, token @ W_value], axis=-2)
        weights = mx.softmax((token @ W_query) @ k_cache.swapaxes(-1, -2) / k_cache.shape[-1] ** 0.5, axis=-1)
        steps.append(weights @ v_cache)
    return {"context": _np(context), "stepwise": _np(mx.concatenate(steps, axis=-2))}


def window_attention(x, w_query, w_key, w_value, window, start):
    x, W_query, W_key, W_value = _mx(x), _mx(w_query), _mx(w_key), _mx(w_value)
    keys, values = x @ W_key, x @ W_value
    queries = x[..., start:, :] @ W_query
    # Query p (absolute, from start) sees keys p-window+1..p: the future and the keys before the window hidden.
    p, j = mx.arange(start, x.shape[-2])[:, None], mx.arange(x.shape[-2])
    weights = _masked_weights(queries @ keys.swapaxes(-1, -2), keys, (j > p) | (j <= p - window))
    return {"weights": _np(weights), "context": _np(weights @ values)}


def causal_flag(x, w_query, w_key, w_value, start):
    x = _mx(x)
    queries = _heads(x[..., start:, :] @ _mx(w_query), 1)
    keys, values = _heads(x @ _mx(w_key), 1), _heads(x @ _mx(w_value), 1)
    return _np(_sdpa(queries, keys, values, "causal", x.ndim == 2)[..., 0, :, :])


def dropout(weights, p, seed):
    layer, weights = nn.Dropout(p), _mx(weights)
    evaluated = layer.eval()(weights)
    mx.random.seed(seed)
    return {"dropout_eval": _np(evaluated), "dropout_train": _np(layer.train()(weights))}


def multi_head_attention(x, w_query, w_key, w_value, w_out, num_heads, causal):
    x = _mx(x)
    d_out = np.shape(w_query)[1]
    head_dim = d_out // num_heads
    queries, keys, values = (_split_heads(x @ _mx(w), num_heads) for w in (w_query, w_key, w_value))
    attn_scores = queries @ keys.swapaxes(-1, -2)
    T = x.shape[-2]
    attn_weights = (
        _masked_weights(attn_scores, keys, _causal_mask(T, T))
        if causal
        else mx.softmax(attn_scores / head_dim**0.5, axis=-1)
    )
    heads = attn_weights @ values  # (.., N, T, H)
    merged = heads.swapaxes(-3, -2).reshape(*x.shape[:-1], d_out)
    return {"heads": _np(heads), "context": _np(merged @ _mx(w_out))}


def fused_attention(x, w_query, w_key, w_value, num_heads, causal):
    x = _mx(x)
    queries, keys, values = (_heads(x @ _mx(w), num_heads) for w in (w_query, w_key, w_value))
    return _np(_sdpa(queries, keys, values, "causal" if causal else None, x.ndim == 2))


def grouped_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    x = _mx(x)
    queries = _heads(x @ _mx(w_query), num_heads)
    group = num_heads // num_kv_heads
    keys, values = (mx.repeat(_heads(x @ _mx(w), num_kv_heads), group, axis=-3) for w in (w_key, w_value))  # in place
    attn_scores = queries @ keys.swapaxes(-1, -2)
    T = x.shape[-2]
    weights = (
        _masked_weights(attn_scores, keys, _causal_mask(T, T))
        if causal
        else mx.softmax(attn_scores / keys.shape[-1] ** 0.5, axis=-1)
    )
    heads = weights @ values
    return _np(heads[0] if x.ndim == 2 else heads)


def grouped_fused_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    x = _mx(x)
    queries = _heads(x @ _mx(w_query), num_heads)
    keys, values = (
        _heads(x @ _mx(w_key), num_kv_heads),
        _heads(x @ _mx(w_value), num_kv_heads),
    )  # not tiled: the kernel groups
    return _np(_sdpa(queries, keys, values, "causal" if causal else None, x.ndim == 2))


def sink_decode_paths(x, w_query, w_key, w_value, num_heads, num_kv_heads, sinks, start):
    x = _mx(x)
    queries = _heads(x @ _mx(w_query), num_heads)
    keys, values = _heads(x @ _mx(w_key), num_kv_heads), _heads(x @ _mx(w_value), num_kv_heads)  # the kernel groups
    # "causal" sits at the bottom right here (MLX's own reference: q_offset = max(0, kL - L)).
    own = {} if sinks is None else {"sinks": _mx(sinks)}
    scale, T = queries.shape[-1] ** -0.5, keys.shape[-2]

    def attend(q, stop, mask):
        return mx.fast.scaled_dot_product_attention(
            q, keys[..., :stop, :], values[..., :stop, :], scale=scale, mask=mask, **own
        )

    batched = attend(queries[..., start:, :], T, "causal")
    alone = [attend(queries[..., p : p + 1, :], p + 1, None) for p in range(start, T)]
    return {"batched": _np(batched), "alone": _np(mx.concatenate(alone, axis=-2))}


def decode_paths(x, w_query, w_key, w_value, num_heads, num_kv_heads, start):
    return sink_decode_paths(x, w_query, w_key, w_value, num_heads, num_kv_heads, None, start)
