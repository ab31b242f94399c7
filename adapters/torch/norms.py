"""PyTorch: QK-norm as HF's Qwen3 and OLMo 2 write it (Qwen3RMSNorm: float32, rsqrt(mean of squares + eps), cast back,
times the weight), per head or over the whole projection, before RoPE; and through torch's own F.rms_norm."""

import torch
import torch.nn.functional as F

from .rotary import _rotate
from .shared import _causal_mask, _np, _split_heads, _t


def _rms_norm(hidden_states, weight, eps):
    input_dtype = hidden_states.dtype
    hidden_states = hidden_states.to(torch.float64 if input_dtype == torch.float64 else torch.float32)
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    hidden_states = hidden_states * torch.rsqrt(variance + eps)
    return weight * hidden_states.to(input_dtype)


def _own_rms_norm(hidden_states, weight, eps):
    return F.rms_norm(hidden_states, weight.shape, weight, eps)


def _normed_heads(norm, x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head):
    x = _t(x)
    H = w_query.shape[-1] // num_heads
    queries, keys, values = (x @ _t(w) for w in (w_query, w_key, w_value))
    weight_q, weight_k = _t(norm_weight_q), _t(norm_weight_k)
    if per_head:  # Qwen3, Gemma 3: the projection viewed as heads, each head's H dims normed
        queries, keys = (_split_heads(t, num_heads, H) for t in (queries, keys))
        queries, keys = norm(queries, weight_q, eps), norm(keys, weight_k, eps)
    else:  # OLMo 2: the whole projection normed, then split
        queries, keys = norm(queries, weight_q, eps), norm(keys, weight_k, eps)
        queries, keys = (_split_heads(t, num_heads, H) for t in (queries, keys))
    positions = torch.arange(x.shape[-2])
    queries, keys = (_rotate(t, positions, "rotate_half", H) for t in (queries, keys))
    return queries, keys, _split_heads(values, num_heads, H)


def _attended(queries, keys, values, causal):
    """The textbook attention of normed heads: {"queries", "weights", "context"} (the wrong adapters share it too)."""
    attn_scores = queries @ keys.mT / queries.shape[-1] ** 0.5
    if causal:
        attn_scores = attn_scores.masked_fill(_causal_mask(attn_scores.shape[-1]), -torch.inf)
    weights = torch.softmax(attn_scores, dim=-1)
    context = (weights @ values).transpose(-3, -2).flatten(-2)
    return {"queries": _np(queries), "weights": _np(weights), "context": _np(context)}


def qk_norm_attention(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
    args = (x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head)
    return _attended(*_normed_heads(_rms_norm, *args), causal)


def qk_norm_flag(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
    args = (x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head)
    queries, keys, values = _normed_heads(_own_rms_norm, *args)
    context = F.scaled_dot_product_attention(queries, keys, values, is_causal=causal)
    return {"queries": _np(queries), "context": _np(context.transpose(-3, -2).flatten(-2))}
