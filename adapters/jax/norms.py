"""JAX: QK-norm (spec conventions.qk_norm) as HF's Qwen3RMSNorm writes it, in jax.numpy (float32 at least,
x * rsqrt(mean(x^2) + eps), cast back, times the weight), per head or over the whole projection, before Gemma's
rotate_half RoPE; and through Flax's own flax.nnx.RMSNorm into jax.nn.dot_product_attention.

flax 0.12.8's RMSNorm (flax/nnx/nn/normalization.py) takes the given weight as its scale through scale_init and
eps as `epsilon`: _compute_stats "promote[s] x to at least float32 ... but preserves double" (`dtype =
jnp.promote_types(dtype, jnp.float32)`), the mean of |x|^2 over reduction_axes=-1; _normalize computes
"mul = lax.rsqrt(var + epsilon)" (eps inside the root), "mul *= scale", "y *= mul" in that dtype, then
"jnp.asarray(y, dtype)", the input's and weight's: the weight multiplied before the cast (Gemma's and OLMo 2's
order)."""

import math

import jax
import jax.numpy as jnp

from .rotary import _rotate
from .shared import _causal_mask, _compiled, _split_heads


def _rms_norm(hidden_states, weight, eps):
    input_dtype = hidden_states.dtype
    hidden_states = hidden_states.astype(jnp.float64 if input_dtype == jnp.float64 else jnp.float32)
    variance = jnp.mean(jnp.square(hidden_states), axis=-1, keepdims=True)
    hidden_states = hidden_states * jax.lax.rsqrt(variance + eps)
    return weight * hidden_states.astype(input_dtype)


def _own_rms_norm(hidden_states, weight, eps):
    from flax import nnx

    norm = nnx.RMSNorm(
        weight.shape[-1], epsilon=eps, param_dtype=weight.dtype, scale_init=lambda *_: weight, rngs=nnx.Rngs(0)
    )
    return norm(hidden_states)


def _normed_heads(norm, x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head):
    """[B, N, T, H] queries, keys (normed, rotated) and values."""
    x = jnp.asarray(x)
    H = w_query.shape[-1] // num_heads
    queries, keys, values = (x @ jnp.asarray(w) for w in (w_query, w_key, w_value))
    weight_q, weight_k = jnp.asarray(norm_weight_q), jnp.asarray(norm_weight_k)
    if per_head:  # Qwen3, Gemma 3: the projection viewed as heads, each head's H dims normed
        queries, keys = (_split_heads(t, num_heads, H) for t in (queries, keys))
        queries, keys = norm(queries, weight_q, eps), norm(keys, weight_k, eps)
    else:  # OLMo 2: the whole projection normed, then split
        queries, keys = norm(queries, weight_q, eps), norm(keys, weight_k, eps)
        queries, keys = (_split_heads(t, num_heads, H) for t in (queries, keys))
    positions = jnp.arange(x.shape[-2])
    queries, keys = (_rotate(t, positions, "rotate_half", H) for t in (queries, keys))
    return queries, keys, _split_heads(values, num_heads, H)


def _attended(queries, keys, values, causal):
    """The textbook attention of normed heads: {"queries", "weights", "context"} (the wrong adapters share it too)."""
    scores = queries @ jnp.swapaxes(keys, -1, -2) / math.sqrt(queries.shape[-1])
    if causal:
        scores = jnp.where(_causal_mask(scores.shape[-1]), -jnp.inf, scores)
    weights = jax.nn.softmax(scores, axis=-1)
    context = jnp.swapaxes(weights @ values, -3, -2)
    return {"queries": queries, "weights": weights, "context": context.reshape(*context.shape[:-2], -1)}


@_compiled("num_heads", "eps", "per_head", "causal")
def qk_norm_attention(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
    args = (x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head)
    return _attended(*_normed_heads(_rms_norm, *args), causal)


@_compiled("num_heads", "eps", "per_head", "causal", eager_float16=True)
def qk_norm_flag(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
    args = (x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head)
    queries, keys, values = _normed_heads(_own_rms_norm, *args)
    # jax.nn.dot_product_attention takes [B, T, N, H]
    context = jax.nn.dot_product_attention(
        *(jnp.swapaxes(t, -3, -2) for t in (queries, keys, values)), is_causal=causal
    )
    return {"queries": queries, "context": context.reshape(*context.shape[:-2], -1)}
