"""MLX: QK-norm (spec conventions.qk_norm) as HF's Qwen3RMSNorm writes it, in mlx.core's ops (float32 at
least, x * rsqrt(mean(x^2) + eps), cast back, times the weight), per head or over the whole projection, before mlx-lm's
rotate_half RoPE; and through MLX's own kernels, mx.fast.rms_norm(x, weight, eps) (what mlx.nn.RMSNorm calls) into
mx.fast.scaled_dot_product_attention.

mx.fast.rms_norm (mlx 0.32.4) documents "The normalization is with respect to the last axis of the input x",
"weight: A multiplicative weight to scale the result by", "eps: A small additive constant for numerical stability";
its CPU path (mlx/fast.cpp's rms_norm fallback) is "auto x = astype(inputs[0], float32, s); x = multiply(x,
rsqrt(add(mean(square(x, s), -1, true, s), array(eps, float32), s), s), s); x = astype(x, out_type, s);" then
"multiply(x, inputs[1], s)": eps inside the root, cast back before the weight (Qwen3's order), and float32 for every
dtype, float64's too (declared in spec/divergences/mlx.yaml)"""

import mlx.core as mx

from .rotary import _rotate
from .shared import _causal_mask, _mx, _np, _split_heads


def _rms_norm(hidden_states, weight, eps):
    input_dtype = hidden_states.dtype
    hidden_states = hidden_states.astype(mx.float64 if input_dtype == mx.float64 else mx.float32)
    variance = mx.mean(mx.square(hidden_states), axis=-1, keepdims=True)
    hidden_states = hidden_states * mx.rsqrt(variance + eps)
    return weight * hidden_states.astype(input_dtype)


def _own_rms_norm(hidden_states, weight, eps):
    return mx.fast.rms_norm(hidden_states, weight, eps)


def _normed_heads(norm, x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head):
    """[B, N, T, H] queries, keys (normed, rotated) and values."""
    x = _mx(x)
    H = w_query.shape[-1] // num_heads
    queries, keys, values = (x @ _mx(w) for w in (w_query, w_key, w_value))
    weight_q, weight_k = _mx(norm_weight_q), _mx(norm_weight_k)
    if per_head:  # Qwen3, Gemma 3: the projection viewed as heads, each head's H dims normed
        queries, keys = (_split_heads(t, num_heads) for t in (queries, keys))
        queries, keys = norm(queries, weight_q, eps), norm(keys, weight_k, eps)
    else:  # OLMo 2: the whole projection normed, then split
        queries, keys = norm(queries, weight_q, eps), norm(keys, weight_k, eps)
        queries, keys = (_split_heads(t, num_heads) for t in (queries, keys))
    positions = mx.arange(x.shape[-2])
    queries, keys = (_rotate(t, positions, "rotate_half", H) for t in (queries, keys))
    return queries, keys, _split_heads(values, num_heads)


def _attended(queries, keys, values, causal):
    """The textbook attention of normed heads: {"queries", "weights", "context"} (the wrong adapters share it too)."""
    scores = queries @ keys.swapaxes(-1, -2) / queries.shape[-1] ** 0.5
    if causal:
        scores = mx.where(_causal_mask(scores.shape[-2], scores.shape[-1]), -mx.inf, scores)
    weights = mx.softmax(scores, axis=-1)
    context = (weights @ values).swapaxes(-3, -2)
    return {"queries": _np(queries), "weights": _np(weights), "context": _np(context.reshape(*context.shape[:-2], -1))}


def qk_norm_attention(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
    args = (x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head)
    return _attended(*_normed_heads(_rms_norm, *args), causal)


def qk_norm_flag(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
    args = (x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head)
    queries, keys, values = _normed_heads(_own_rms_norm, *args)
    context = mx.fast.scaled_dot_product_attention(
        queries, keys, values, scale=queries.shape[-1] ** -0.5, mask="causal" if causal else None
    ).swapaxes(-3, -2)
    return {"queries": _np(queries), "context": _np(context.reshape(*context.shape[:-2], -1))}
