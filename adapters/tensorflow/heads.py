"""TensorFlow: past the documents' one head: masks, decoding with a cache, dropout, several heads and grouped heads."""

import keras
import numpy as np
import tensorflow as tf

from .shared import (
    _batched,
    _causal_mask,
    _masked_weights,
    _matmul,
    _np,
    _scaled_softmax,
    _split_heads,
    _split_last,
    _swap_tokens_and_heads,
    _t,
)


def masked_attention(x, w_query, w_key, w_value, mask):
    x = _t(x)
    Q, K, V = _matmul(x, _t(w_query)), _matmul(x, _t(w_key)), _matmul(x, _t(w_value))
    weights = _masked_weights(tf.linalg.matmul(Q, K, transpose_b=True), K, _t(mask))
    return {"weights": _np(weights), "context": _np(tf.linalg.matmul(weights, V))}


@_batched
def mask_conventions(x, w_query, w_key, w_value, mask, api, fill):
    hidden = _t(mask) if len(np.shape(mask)) == 3 else _t(mask)[tf.newaxis]
    # keras.ops.dot_product_attention takes [B, T, N, H] and masks [B, N, T, S]: one head here.
    Q, K, V = (_matmul(x, _t(w))[..., tf.newaxis, :] for w in (w_query, w_key, w_value))
    if api == "bool":  # its boolean mask: True = the key takes part, the suite's opposite
        out = keras.ops.dot_product_attention(Q, K, V, mask=tf.logical_not(hidden)[:, tf.newaxis])
    else:  # its additive `bias`
        value = {"neg_inf": -np.inf, "large_negative": -1e9, "dtype_min": x.dtype.min}[fill]
        bias = tf.where(hidden, tf.constant(value, x.dtype), tf.zeros([], x.dtype))[:, tf.newaxis]
        out = keras.ops.dot_product_attention(Q, K, V, bias=bias)
    return _np(out[..., 0, :])


def causal_attention(x, w_query, w_key, w_value):
    return masked_attention(x, w_query, w_key, w_value, _np(_causal_mask(x.shape[-2])))


def _offset_causal_mask(T_q, T_k):
    # The query at absolute position p = T_k - T_q + i may see keys 0..p: the band moves right.
    return tf.linalg.band_part(tf.ones([T_q, T_k]), -1, T_k - T_q) == 0


def decode_attention(x, w_query, w_key, w_value, start):
    x = _t(x)
    K, V = _matmul(x, _t(w_key)), _matmul(x, _t(w_value))
    Q = _matmul(x[..., start:, :], _t(w_query))
    weights = _masked_weights(
        tf.linalg.matmul(Q, K, transpose_b=True), K, _offset_causal_mask(Q.shape[-2], K.shape[-2])
    )
    # Token by token: append the new token's key and value to the cache, attend over all of it.
    k_cache, v_cache, steps = K[..., :start, :], V[..., :start, :], []
    for p in range(start, x.shape[-2]):
        token = x[..., p : p + 1, :]
        k_cache = tf.concat([k_cache, _matmul(token, _t(w_key))], axis=-2)
        v_cache = tf.concat([v_cache, _matmul(token, _t(w_value))], axis=-2)
        step = _scaled_softmax(tf.linalg.matmul(_matmul(token, _t(w_query)), k_cache, transpose_b=True), k_cache)
        steps.append(tf.linalg.matmul(step, v_cache))
    return {"context": _np(tf.linalg.matmul(weights, V)), "stepwise": _np(tf.concat(steps, axis=-2))}


def window_attention(x, w_query, w_key, w_value, window, start):
    x = _t(x)
    K, V = _matmul(x, _t(w_key)), _matmul(x, _t(w_value))
    Q = _matmul(x[..., start:, :], _t(w_query))
    # Query p (absolute, from start) sees keys p-window+1..p: the future and the keys before the window hidden.
    p, j = tf.range(start, x.shape[-2])[:, None], tf.range(x.shape[-2])[None, :]
    weights = _masked_weights(tf.linalg.matmul(Q, K, transpose_b=True), K, (j > p) | (j <= p - window))
    return {"weights": _np(weights), "context": _np(tf.linalg.matmul(weights, V))}


def causal_flag(x, w_query, w_key, w_value, start):
    x = _t(x)
    batched = len(x.shape) == 3
    if not batched:
        x = x[tf.newaxis]  # keras.ops.dot_product_attention takes 4-D [B, T, N, H] only
    Q, K, V = (
        _matmul(t, _t(w))[..., tf.newaxis, :] for t, w in ((x[..., start:, :], w_query), (x, w_key), (x, w_value))
    )
    heads = keras.ops.dot_product_attention(Q, K, V, is_causal=True)[..., 0, :]  # [B, T, N=1, H]
    return _np(heads if batched else heads[0])


def dropout(weights, p, seed):
    layer, weights = keras.layers.Dropout(p, seed=seed), _t(weights)
    return {"dropout_eval": _np(layer(weights, training=False)), "dropout_train": _np(layer(weights, training=True))}


def multi_head_attention(x, w_query, w_key, w_value, w_out, num_heads, causal):
    x = _t(x)
    d_out = w_query.shape[1]
    head_dim = d_out // num_heads
    Q, K, V = (_split_heads(_matmul(x, _t(w)), num_heads, head_dim) for w in (w_query, w_key, w_value))
    scores = tf.linalg.matmul(Q, K, transpose_b=True)
    weights = _masked_weights(scores, K, _causal_mask(x.shape[-2])) if causal else _scaled_softmax(scores, K)
    heads = tf.linalg.matmul(weights, V)  # (.., N, T, H)
    merged = tf.reshape(tf.transpose(heads, _swap_tokens_and_heads(len(heads.shape))), x.shape[:-1] + [d_out])
    return {"heads": _np(heads), "context": _np(_matmul(merged, _t(w_out)))}


def fused_attention(x, w_query, w_key, w_value, num_heads, causal):
    x = _t(x)
    batched = len(x.shape) == 3
    if not batched:
        x = x[tf.newaxis]  # keras.ops.dot_product_attention takes 4-D [B, T, N, H] only
    head_dim = w_query.shape[1] // num_heads
    Q, K, V = (_split_last(_matmul(x, _t(w)), num_heads, head_dim) for w in (w_query, w_key, w_value))
    heads = tf.transpose(keras.ops.dot_product_attention(Q, K, V, is_causal=causal), [0, 2, 1, 3])  # (B, N, T, H)
    return _np(heads if batched else heads[0])


@_batched
def grouped_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    head_dim = w_query.shape[1] // num_heads
    group = num_heads // num_kv_heads
    Q = _split_heads(_matmul(x, _t(w_query)), num_heads, head_dim)
    K, V = (
        tf.repeat(_split_heads(_matmul(x, _t(w)), num_kv_heads, head_dim), group, axis=1)  # each head in place
        for w in (w_key, w_value)
    )
    scores = tf.linalg.matmul(Q, K, transpose_b=True)
    weights = _masked_weights(scores, K, _causal_mask(x.shape[-2])) if causal else _scaled_softmax(scores, K)
    return _np(tf.linalg.matmul(weights, V))


@_batched
def grouped_fused_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    head_dim = w_query.shape[1] // num_heads
    Q, K, V = (
        _split_last(_matmul(x, _t(w)), n, head_dim)
        for w, n in ((w_query, num_heads), (w_key, num_kv_heads), (w_value, num_kv_heads))
    )
    heads = keras.ops.dot_product_attention(Q, K, V, is_causal=causal)  # [B, T, N, H]; fewer K/V heads allowed
    return _np(tf.transpose(heads, [0, 2, 1, 3]))


def decode_paths(x, w_query, w_key, w_value, num_heads, num_kv_heads, start):
    head_dim = w_query.shape[1] // num_heads
    Q, K, V = (
        _split_last(_matmul(_t(x), _t(w)), n, head_dim)
        for w, n in ((w_query, num_heads), (w_key, num_kv_heads), (w_value, num_kv_heads))
    )
    T = K.shape[-3]
    if start:  # a chunk after a cache: the causal mask at the bottom right (True = may attend, keras' polarity)
        seen = np.tril(np.ones((T - start, T), dtype=bool), start)
        batched = keras.ops.dot_product_attention(Q[:, start:], K, V, mask=seen)
    else:  # prefill: the causal flag
        batched = keras.ops.dot_product_attention(Q, K, V, is_causal=True)
    alone = [keras.ops.dot_product_attention(Q[:, p : p + 1], K[:, : p + 1], V[:, : p + 1]) for p in range(start, T)]
    transposed = (tf.transpose(t, [0, 2, 1, 3]) for t in (batched, tf.concat(alone, axis=1)))
    return dict(zip(("batched", "alone"), map(_np, transposed)))
