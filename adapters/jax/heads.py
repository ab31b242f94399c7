"""JAX: past the documents' one head: masks, decoding with a cache, dropout, several heads and grouped heads."""

import jax
import jax.numpy as jnp
import numpy as np

from .shared import _causal_mask, _compiled, _masked_weights, _scaled_softmax, _split_heads, _split_last


def _masked_attention(x, w_query, w_key, w_value, mask):
    x = jnp.asarray(x)
    queries, keys, values = x @ jnp.asarray(w_query), x @ jnp.asarray(w_key), x @ jnp.asarray(w_value)
    attn_weights = _masked_weights(queries @ jnp.swapaxes(keys, -1, -2), keys, jnp.asarray(mask))
    return {"weights": attn_weights, "context": attn_weights @ values}


masked_attention = _compiled()(_masked_attention)


def _mask_conventions(x, w_query, w_key, w_value, mask, api, fill):
    x, hidden = jnp.asarray(x), jnp.asarray(mask)
    # jax.nn.dot_product_attention takes [B, T, N, H] and masks [B, N, T, S]: one head here.
    queries, keys, values = ((x @ jnp.asarray(w))[..., None, :] for w in (w_query, w_key, w_value))
    if api == "bool":  # its boolean mask: True = the key takes part, the suite's opposite
        out = jax.nn.dot_product_attention(queries, keys, values, mask=~hidden[..., None, :, :])
    else:  # its additive `bias`; the fill is data, not a compile-time constant: one program for the three
        bias = jnp.where(hidden, jnp.asarray(fill, x.dtype), jnp.zeros((), x.dtype))[..., None, :, :]
        out = jax.nn.dot_product_attention(queries, keys, values, bias=bias)
    return out[..., 0, :]


_mask_conventions_compiled = _compiled("api", eager_float16=True)(_mask_conventions)


def mask_conventions(x, w_query, w_key, w_value, mask, api, fill):
    dtype = np.asarray(x).dtype
    value = {"neg_inf": -np.inf, "large_negative": -1e9, "dtype_min": float(jnp.finfo(dtype).min)}[fill]
    return _mask_conventions_compiled(x, w_query, w_key, w_value, mask, api, value)


@_compiled()
def causal_attention(x, w_query, w_key, w_value):
    return _masked_attention(x, w_query, w_key, w_value, _causal_mask(x.shape[-2]))


def _offset_causal_mask(T_q, T_k):
    # The query at absolute position p = T_k - T_q + i may see keys 0..p: the diagonal moves right.
    return jnp.triu(jnp.ones((T_q, T_k), dtype=bool), k=T_k - T_q + 1)


@_compiled("start")
def decode_attention(x, w_query, w_key, w_value, start):
    x, w_query, w_key, w_value = map(jnp.asarray, (x, w_query, w_key, w_value))
    keys, values = x @ w_key, x @ w_value
    queries = x[..., start:, :] @ w_query
    weights = _masked_weights(
        queries @ jnp.swapaxes(keys, -1, -2), keys, _offset_causal_mask(queries.shape[-2], keys.shape[-2])
    )
    # Token by token, JAX's way: a cache of fixed size written in place (lax.dynamic_update_slice),
    # the positions not yet written hidden by position, so every step is the same program.
    T = x.shape[-2]
    k_cache = jnp.zeros_like(keys).at[..., :start, :].set(keys[..., :start, :])
    v_cache = jnp.zeros_like(values).at[..., :start, :].set(values[..., :start, :])

    def step(p, carry):
        k_cache, v_cache, out = carry
        token = jax.lax.dynamic_slice_in_dim(x, p, 1, axis=-2)
        k_cache = jax.lax.dynamic_update_slice_in_dim(k_cache, token @ w_key, p, axis=-2)
        v_cache = jax.lax.dynamic_update_slice_in_dim(v_cache, token @ w_value, p, axis=-2)
        unwritten = jnp.arange(T) > p
        attended = _masked_weights((token @ w_query) @ jnp.swapaxes(k_cache, -1, -2), k_cache, unwritten) @ v_cache
        return k_cache, v_cache, jax.lax.dynamic_update_slice_in_dim(out, attended, p - start, axis=-2)

    out = jnp.zeros((*x.shape[:-2], T - start, w_value.shape[-1]), x.dtype)
    _, _, stepwise = jax.lax.fori_loop(start, T, step, (k_cache, v_cache, out))
    return {"context": weights @ values, "stepwise": stepwise}


@_compiled("window", "start")
def window_attention(x, w_query, w_key, w_value, window, start):
    x = jnp.asarray(x)
    keys, values = x @ jnp.asarray(w_key), x @ jnp.asarray(w_value)
    queries = x[..., start:, :] @ jnp.asarray(w_query)
    # Query p (absolute, from start) sees keys p-window+1..p: the future and the keys before the window hidden.
    p, j = jnp.arange(start, x.shape[-2])[:, None], jnp.arange(x.shape[-2])
    weights = _masked_weights(queries @ jnp.swapaxes(keys, -1, -2), keys, (j > p) | (j <= p - window))
    return {"weights": weights, "context": weights @ values}


@_compiled("window", "start", eager_float16=True)
def window_flag(x, w_query, w_key, w_value, window, start):
    x = jnp.asarray(x)
    queries, keys, values = (t @ jnp.asarray(w) for t, w in ((x[..., start:, :], w_query), (x, w_key), (x, w_value)))
    # local_window_size=(left, right): keys i-left..i+right; (W-1, 0) is causal with W keys, the query's own included
    heads = jax.nn.dot_product_attention(
        *(t[..., None, :] for t in (queries, keys, values)), local_window_size=(window - 1, 0)
    )  # [B, T, N=1, H]
    return heads[..., 0, :]


@_compiled("start", eager_float16=True)
def causal_flag(x, w_query, w_key, w_value, start):
    x = jnp.asarray(x)
    queries, keys, values = (t @ jnp.asarray(w) for t, w in ((x[..., start:, :], w_query), (x, w_key), (x, w_value)))
    heads = jax.nn.dot_product_attention(
        *(t[..., None, :] for t in (queries, keys, values)), is_causal=True
    )  # [B, T, N=1, H]
    return heads[..., 0, :]


@_compiled()
def dropout(weights, p, seed):
    weights = jnp.asarray(weights)
    keep = jax.random.bernoulli(jax.random.key(seed), 1 - p, weights.shape)
    return {"dropout_eval": weights, "dropout_train": jnp.where(keep, weights / (1 - p), 0)}


@_compiled("num_heads", "causal")
def multi_head_attention(x, w_query, w_key, w_value, w_out, num_heads, causal):
    x = jnp.asarray(x)
    d_out = w_query.shape[1]
    head_dim = d_out // num_heads
    queries, keys, values = (_split_heads(x @ jnp.asarray(w), num_heads, head_dim) for w in (w_query, w_key, w_value))
    scores = queries @ jnp.swapaxes(keys, -1, -2)
    weights = _masked_weights(scores, keys, _causal_mask(x.shape[-2])) if causal else _scaled_softmax(scores, keys)
    heads = weights @ values  # (.., N, T, H)
    merged = jnp.swapaxes(heads, -3, -2).reshape(*x.shape[:-1], d_out)
    return {"heads": heads, "context": merged @ jnp.asarray(w_out)}


@_compiled("num_heads", "causal", eager_float16=True)
def fused_attention(x, w_query, w_key, w_value, num_heads, causal):
    x = jnp.asarray(x)
    head_dim = w_query.shape[1] // num_heads
    queries, keys, values = (_split_last(x @ jnp.asarray(w), num_heads, head_dim) for w in (w_query, w_key, w_value))
    heads = jax.nn.dot_product_attention(queries, keys, values, is_causal=causal)  # (.., T, N, H)
    return jnp.swapaxes(heads, -3, -2)


@_compiled("num_heads", "num_kv_heads", "causal")
def grouped_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    x = jnp.asarray(x)
    head_dim = w_query.shape[1] // num_heads
    group = num_heads // num_kv_heads
    queries = _split_heads(x @ jnp.asarray(w_query), num_heads, head_dim)
    keys, values = (
        jnp.repeat(_split_heads(x @ jnp.asarray(w), num_kv_heads, head_dim), group, axis=-3)  # in place
        for w in (w_key, w_value)
    )
    scores = queries @ jnp.swapaxes(keys, -1, -2)
    weights = _masked_weights(scores, keys, _causal_mask(x.shape[-2])) if causal else _scaled_softmax(scores, keys)
    return weights @ values


@_compiled("num_heads", "num_kv_heads", "causal", eager_float16=True)
def grouped_fused_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    x = jnp.asarray(x)
    head_dim = w_query.shape[1] // num_heads
    queries, keys, values = (
        _split_last(x @ jnp.asarray(w), n, head_dim)
        for w, n in ((w_query, num_heads), (w_key, num_kv_heads), (w_value, num_kv_heads))
    )
    return jnp.swapaxes(
        jax.nn.dot_product_attention(queries, keys, values, is_causal=causal), -3, -2
    )  # fewer K/V heads allowed


@_compiled("causal", eager_float16=True)
def _fused_block(x, keys, values, seen, lengths, causal):
    """x: the queries [B, Q, N, H] over keys [B, S, K, H]; seen [Q, S] True = may attend (jax's polarity), or None;
    lengths [B]: how many of the keys are real (a decode step's fixed-size cache), or None."""
    return jax.nn.dot_product_attention(x, keys, values, mask=seen, is_causal=causal, key_value_seq_lengths=lengths)


def decode_paths(x, w_query, w_key, w_value, num_heads, num_kv_heads, start):
    x = jnp.asarray(x)
    head_dim = w_query.shape[1] // num_heads
    queries, keys, values = (
        _split_last(x @ jnp.asarray(w), n, head_dim)
        for w, n in ((w_query, num_heads), (w_key, num_kv_heads), (w_value, num_kv_heads))
    )
    B, T = keys.shape[0], keys.shape[-3]
    if start:  # a chunk after a cache: the causal mask at the bottom right
        seen = jnp.tril(jnp.ones((T - start, T), dtype=bool), start)
        batched = _fused_block(queries[..., start:, :, :], keys, values, seen, None, False)
    else:  # prefill: the causal flag
        batched = _fused_block(queries, keys, values, None, None, True)
    # A decode step as JAX code runs one: the cache a fixed size, its filled length counted (one program for every p).
    alone = [
        _fused_block(queries[..., p : p + 1, :, :], keys, values, None, jnp.full((B,), p + 1, jnp.int32), False)
        for p in range(start, T)
    ]
    return {"batched": np.swapaxes(batched, -3, -2), "alone": np.swapaxes(np.concatenate(alone, axis=-3), -3, -2)}
