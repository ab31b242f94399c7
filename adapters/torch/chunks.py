"""PyTorch: Llama 4's attention as transformers' Llama4TextAttention writes it (the chunked mask on the causal one, the
NoPE layers' query temperature, the weightless L2Norm after RoPE), and the chunks through SDPA's boolean mask."""

import torch
import torch.nn.functional as F

from .rotary import _rotate
from .shared import _np, _split_heads, _t


def _wide(t):  # what transformers computes the norm and the temperature in: float32, float64 for a float64 model
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def _chunked_hidden(padding, chunk):
    """[B, T, T], True = hidden: chunked_overlay with left_padding (the chunks counted from each row's first real
    token) on the causal mask, and the padding's keys."""
    padding = _t(padding)
    T, first = padding.shape[-1], (~padding).int().argmax(-1)[:, None, None]
    i, j = torch.arange(T)[:, None] - first, torch.arange(T)[None, :] - first
    return (
        (j > i)
        | (torch.div(j, chunk, rounding_mode="floor") != torch.div(i, chunk, rounding_mode="floor"))
        | (padding[:, None, :])
    )


def chunked_attention(x, w_query, w_key, w_value, chunk, padding):
    x, rows = _t(x), _t(padding)[..., None]
    queries, keys, values = x @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    attn_scores = (queries @ keys.mT).masked_fill(_chunked_hidden(padding, chunk), -torch.inf)
    # A padding row sees no key (left padding, causal): its softmax is 0/0, zeroed as attention_ref's masked_fill.
    weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1).masked_fill(rows, 0)
    return {"weights": _np(weights), "context": _np(weights @ values)}


def chunked_flag(x, w_query, w_key, w_value, chunk, padding):
    x = _t(x)
    queries, keys, values = x @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    context = F.scaled_dot_product_attention(queries, keys, values, attn_mask=~_chunked_hidden(padding, chunk))
    return _np(torch.where(_t(padding)[..., None], 0, context))  # where, not a product: SDPA's empty rows are NaN


def _l2_norm(t, eps):  # Llama4TextL2Norm: x * rsqrt(mean(x^2) + eps) in float32, no weight, cast back
    wide = t.to(_wide(t))
    return (wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)).to(t.dtype)


def llama4_attention(
    x, w_query, w_key, w_value, num_heads, num_kv_heads, use_rope, chunk, floor_scale, attn_scale, eps, start
):
    x = _t(x)
    T, H, group = x.shape[-2], w_query.shape[-1] // num_heads, num_heads // num_kv_heads
    queries = _split_heads(x[..., start:, :] @ _t(w_query), num_heads, H)
    keys = _split_heads(x @ _t(w_key), num_kv_heads, H)
    values = _split_heads(x @ _t(w_value), num_kv_heads, H).repeat_interleave(group, -3)  # Llama's repeat_kv
    positions = torch.arange(T)  # cache_position: the queries' are start..T-1
    if use_rope:
        queries = _l2_norm(_rotate(queries, positions[start:], "interleaved", H), eps)
        keys = _l2_norm(_rotate(keys, positions, "interleaved", H), eps)
    elif attn_scale:
        p = positions[start:].to(_wide(queries))
        scales = torch.log(torch.floor((p + 1.0) / floor_scale) + 1.0) * attn_scale + 1.0
        queries = (queries * scales[:, None]).to(queries.dtype)
    i, j = positions[start:, None], positions
    hidden = (j > i) | ((j // chunk != i // chunk) if use_rope and chunk else False)
    attn_scores = (queries @ keys.repeat_interleave(group, -3).mT / H**0.5).masked_fill(hidden, -torch.inf)
    context = torch.softmax(attn_scores, dim=-1) @ values
    return {"queries": _np(queries), "context": _np(context.transpose(-3, -2).flatten(-2))}
