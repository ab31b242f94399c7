"""PyTorch: the scores before the softmax past the documents', soft-capped as HF's Gemma 2 writes it and with
gpt-oss's sinks as its reference torch code adds them (a sink column concatenated, softmaxed, then dropped); a decoder
with all of them; SDPA's own scale."""

import torch
import torch.nn.functional as F

from .rotary import _rotate
from .shared import _causal_mask, _np, _split_heads, _t


def softcap_attention(x, w_query, w_key, w_value, cap, causal):
    x = _t(x)
    queries, keys, values = x @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    attn_scores = queries @ keys.mT / keys.shape[-1] ** 0.5
    if cap:  # Gemma 2: the scaled scores capped, then the mask
        attn_scores = torch.tanh(attn_scores / cap) * cap
    if causal:
        attn_scores = attn_scores.masked_fill(_causal_mask(x.shape[-2]), -torch.inf)
    weights = torch.softmax(attn_scores, dim=-1)
    return {"weights": _np(weights), "context": _np(weights @ values)}


def _sink_softmax(attn_scores, sinks, num_heads):
    """gpt-oss's: head n's sink a column concatenated to its scores, softmaxed with them, then dropped."""
    sink = _t(sinks).reshape(num_heads, 1, 1).expand(*attn_scores.shape[:-1], 1)
    return torch.softmax(torch.cat([attn_scores, sink], dim=-1), dim=-1)[..., :-1]


def sink_attention(x, w_query, w_key, w_value, sinks, num_heads, mask):
    x = _t(x)
    H = w_query.shape[-1] // num_heads
    queries, keys, values = (_split_heads(x @ _t(w), num_heads, H) for w in (w_query, w_key, w_value))
    attn_scores = (queries @ keys.mT / H**0.5).masked_fill(_t(mask)[..., None, :, :], -torch.inf)  # True = hidden
    weights = _sink_softmax(attn_scores, sinks, num_heads)
    return {"weights": _np(weights), "context": _np((weights @ values).transpose(-3, -2).flatten(-2))}


def decoder_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, pairing, window, cap, sinks):
    x = _t(x)
    T, H, group = x.shape[-2], w_query.shape[-1] // num_heads, num_heads // num_kv_heads
    positions = torch.arange(T)
    queries = _rotate(_split_heads(x @ _t(w_query), num_heads, H), positions, pairing, H)
    keys = _rotate(_split_heads(x @ _t(w_key), num_kv_heads, H), positions, pairing, H).repeat_interleave(group, -3)
    values = _split_heads(x @ _t(w_value), num_kv_heads, H).repeat_interleave(group, -3)  # Llama's repeat_kv
    attn_scores = queries @ keys.mT / H**0.5
    if cap:
        attn_scores = torch.tanh(attn_scores / cap) * cap
    i, j = positions[:, None], positions
    attn_scores = attn_scores.masked_fill((j > i) | (j <= i - window), -torch.inf)  # HF's sliding-window mask
    weights = _sink_softmax(attn_scores, sinks, num_heads)
    return _np((weights @ values).transpose(-3, -2).flatten(-2))


def scale_flag(x, w_query, w_key, w_value, softmax_scale, causal):
    x = _t(x)
    q, k, v = x @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    return _np(F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=softmax_scale))
