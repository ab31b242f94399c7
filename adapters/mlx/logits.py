"""MLX: the scores before the softmax past the documents', soft-capped (Gemma 2's order) and with gpt-oss's sinks,
from mlx.core's ops and through mx.fast.scaled_dot_product_attention's sinks argument; ALiBi's bias as BLOOM builds
it, added to the scores and as the fused kernel's additive mask; a decoder with all of them; the fused kernel's own
scale."""

import math

import mlx.core as mx

from .rotary import _rotate
from .shared import _causal_mask, _heads, _mx, _np, _split_heads


def softcap_attention(x, w_query, w_key, w_value, cap, causal):
    x = _mx(x)
    queries, keys, values = x @ _mx(w_query), x @ _mx(w_key), x @ _mx(w_value)
    scores = queries @ keys.swapaxes(-1, -2) / keys.shape[-1] ** 0.5
    if cap:  # Gemma 2: the scaled scores capped, then the mask
        scores = mx.tanh(scores / cap) * cap
    if causal:
        scores = mx.where(_causal_mask(x.shape[-2], x.shape[-2]), -mx.inf, scores)
    weights = mx.softmax(scores, axis=-1)
    return {"weights": _np(weights), "context": _np(weights @ values)}


def _sink_softmax(scores, sinks, num_heads):
    """gpt-oss's: head n's sink a column concatenated to its scores, softmaxed with them, then dropped."""
    sink = mx.broadcast_to(_mx(sinks).reshape(num_heads, 1, 1), (*scores.shape[:-1], 1))
    return mx.softmax(mx.concatenate([scores, sink], axis=-1), axis=-1)[..., :-1]


def sink_attention(x, w_query, w_key, w_value, sinks, num_heads, mask):
    x = _mx(x)
    queries, keys, values = (_split_heads(x @ _mx(w), num_heads) for w in (w_query, w_key, w_value))
    scores = queries @ keys.swapaxes(-1, -2) / queries.shape[-1] ** 0.5
    scores = mx.where(_mx(mask)[:, None], -mx.inf, scores)  # True = hidden
    weights = _sink_softmax(scores, sinks, num_heads)
    context = (weights @ values).swapaxes(-3, -2)
    return {"weights": _np(weights), "context": _np(context.reshape(*context.shape[:-2], -1))}


def fused_sink_attention(x, w_query, w_key, w_value, sinks, num_heads, mask):
    x = _mx(x)
    queries, keys, values = (_split_heads(x @ _mx(w), num_heads) for w in (w_query, w_key, w_value))
    context = mx.fast.scaled_dot_product_attention(
        queries,
        keys,
        values,
        scale=queries.shape[-1] ** -0.5,
        mask=~_mx(mask)[:, None],  # a boolean mask here is True = attend
        sinks=_mx(sinks),
    ).swapaxes(-3, -2)
    return _np(context.reshape(*context.shape[:-2], -1))


def _alibi_slopes(num_heads, dtype):
    """BLOOM's build_alibi_tensor in mlx.core: float32, float64 where the scores are."""
    wide = mx.float64 if dtype == mx.float64 else mx.float32
    closest = 2 ** math.floor(math.log2(num_heads))
    base = mx.array(2 ** (-(2 ** -(math.log2(closest) - 3))), dtype=wide)
    slopes = mx.power(base, mx.arange(1, 1 + closest).astype(wide))
    if closest != num_heads:
        extra_base = mx.array(2 ** (-(2 ** -(math.log2(2 * closest) - 3))), dtype=wide)
        slopes = mx.concatenate(
            [slopes, mx.power(extra_base, mx.arange(1, 1 + 2 * (num_heads - closest), 2).astype(wide))]
        )
    return slopes


def alibi_slopes(num_heads):
    return _np(_alibi_slopes(num_heads, mx.float32))


def _alibi_bias(num_heads, T, dtype, causal):
    """slope * (j - i), [N, T, T], in the slopes' precision, stored in the scores' dtype; -inf where causal hides."""
    positions = mx.arange(T)
    slopes = _alibi_slopes(num_heads, dtype)
    bias = (slopes[:, None, None] * (positions - positions[:, None]).astype(slopes.dtype)).astype(dtype)
    return mx.where(_causal_mask(T, T), -mx.inf, bias) if causal else bias


def alibi_attention(x, w_query, w_key, w_value, num_heads, causal):
    x = _mx(x)
    queries, keys, values = (_split_heads(x @ _mx(w), num_heads) for w in (w_query, w_key, w_value))
    scores = queries @ keys.swapaxes(-1, -2) / queries.shape[-1] ** 0.5 + _alibi_bias(
        num_heads, x.shape[-2], x.dtype, False
    )
    if causal:
        scores = mx.where(_causal_mask(x.shape[-2], x.shape[-2]), -mx.inf, scores)
    weights = mx.softmax(scores, axis=-1)
    context = (weights @ values).swapaxes(-3, -2)
    return {"weights": _np(weights), "context": _np(context.reshape(*context.shape[:-2], -1))}


def alibi_flag(x, w_query, w_key, w_value, num_heads, causal):
    x = _mx(x)
    queries, keys, values = (_split_heads(x @ _mx(w), num_heads) for w in (w_query, w_key, w_value))
    bias = _alibi_bias(num_heads, x.shape[-2], x.dtype, causal)  # an additive mask: added to the scaled scores
    context = mx.fast.scaled_dot_product_attention(
        queries, keys, values, scale=queries.shape[-1] ** -0.5, mask=bias
    ).swapaxes(-3, -2)
    return _np(context.reshape(*context.shape[:-2], -1))


def decoder_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, pairing, window, cap, sinks):
    x = _mx(x)
    T, H, group = x.shape[-2], w_query.shape[-1] // num_heads, num_heads // num_kv_heads
    positions = mx.arange(T)
    queries = _rotate(_split_heads(x @ _mx(w_query), num_heads), positions, pairing, H)
    keys = mx.repeat(_rotate(_split_heads(x @ _mx(w_key), num_kv_heads), positions, pairing, H), group, axis=-3)
    values = mx.repeat(_split_heads(x @ _mx(w_value), num_kv_heads), group, axis=-3)  # each head in place
    scores = queries @ keys.swapaxes(-1, -2) / H**0.5
    if cap:
        scores = mx.tanh(scores / cap) * cap
    i, j = positions[:, None], positions
    scores = mx.where((j > i) | (j <= i - window), -mx.inf, scores)  # mlx-lm's create_causal_mask with a window
    weights = _sink_softmax(scores, sinks, num_heads)
    context = (weights @ values).swapaxes(-3, -2)
    return _np(context.reshape(*context.shape[:-2], -1))


def scale_flag(x, w_query, w_key, w_value, softmax_scale, causal):
    x = _mx(x)
    q, k, v = (_heads(x @ _mx(w), 1) for w in (w_query, w_key, w_value))
    out = mx.fast.scaled_dot_product_attention(q, k, v, scale=softmax_scale, mask="causal" if causal else None)
    return _np(out[:, 0] if x.ndim == 3 else out[0, 0])
