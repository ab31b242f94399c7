"""PyTorch: the scores before the softmax past the documents', soft-capped as HF's Gemma 2 writes it and with
gpt-oss's sinks as its reference torch code adds them (a sink column concatenated, softmaxed, then dropped); ALiBi's
bias as BLOOM builds it, added to the scores and as SDPA's float attn_mask; a decoder with all of them; SDPA's own
scale."""

import math

import torch
import torch.nn.functional as F

from .flex import _flexed
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


def _alibi_slopes(num_heads, dtype):
    """BLOOM's build_alibi_tensor (transformers, models/bloom/modeling_bloom.py): float32 there, float64 here where the
    scores are float64, so that the slopes hold the scores' precision."""
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    closest = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest) - 3))), dtype=wide)
    slopes = torch.pow(base, torch.arange(1, 1 + closest, dtype=torch.int32))
    if closest != num_heads:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest) - 3))), dtype=wide)
        extra_powers = torch.arange(1, 1 + 2 * (num_heads - closest), 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)])
    return slopes


def alibi_slopes(num_heads):
    return _np(_alibi_slopes(num_heads, torch.float32))


def _alibi_bias(num_heads, T, dtype, causal):
    """slope * (j - i), [N, T, T], made in the slopes' precision and stored in the scores' dtype (BLOOM's .to(dtype));
    -inf where the causal mask hides a key."""
    positions = torch.arange(T)
    bias = (_alibi_slopes(num_heads, dtype)[:, None, None] * (positions - positions[:, None])).to(dtype)
    return bias.masked_fill(_causal_mask(T), -torch.inf) if causal else bias


def _alibi_heads(x, w_query, w_key, w_value, num_heads):
    H = w_query.shape[-1] // num_heads
    return (_split_heads(x @ _t(w), num_heads, H) for w in (w_query, w_key, w_value))


def alibi_attention(x, w_query, w_key, w_value, num_heads, causal):
    x = _t(x)
    queries, keys, values = _alibi_heads(x, w_query, w_key, w_value, num_heads)
    attn_scores = queries @ keys.mT / queries.shape[-1] ** 0.5 + _alibi_bias(num_heads, x.shape[-2], x.dtype, False)
    if causal:
        attn_scores = attn_scores.masked_fill(_causal_mask(x.shape[-2]), -torch.inf)
    weights = torch.softmax(attn_scores, dim=-1)
    return {"weights": _np(weights), "context": _np((weights @ values).transpose(-3, -2).flatten(-2))}


def alibi_flag(x, w_query, w_key, w_value, num_heads, causal):
    x = _t(x)
    queries, keys, values = _alibi_heads(x, w_query, w_key, w_value, num_heads)
    if torch.compiler.is_compiling():  # compiled: FlexAttention, the bias a score_mod on its scaled scores
        slopes = _alibi_slopes(num_heads, x.dtype)
        context = _flexed(
            queries,
            keys,
            values,
            score_mod=lambda score, b, h, q, k: score + slopes[h] * (k - q),
            mask_mod=(lambda b, q, k: k <= q) if causal else None,
        )
    else:
        bias = _alibi_bias(num_heads, x.shape[-2], x.dtype, causal)  # SDPA adds a float attn_mask to the scaled scores
        context = F.scaled_dot_product_attention(queries, keys, values, attn_mask=bias)
    return _np(context.transpose(-3, -2).flatten(-2))


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
