"""PyTorch: cross-attention as an encoder-decoder writes it (queries from the decoder, keys and values from the
encoder's output, its padding masked_fill'd) and through SDPA's bool attn_mask; T5's relative position bias as HF's
T5Attention computes it (models/t5/modeling_t5.py: _relative_position_bucket, compute_bias), on unscaled scores."""

import math

import torch
import torch.nn.functional as F

from .shared import _causal_mask, _np, _split_heads, _t


def _cross_heads(x, memory, w_query, w_key, w_value, num_heads):
    x, memory = _t(x), _t(memory)
    H = w_query.shape[-1] // num_heads
    return _split_heads(x @ _t(w_query), num_heads, H), *(
        _split_heads(memory @ _t(w), num_heads, H) for w in (w_key, w_value)
    )


def cross_attention(x, memory, w_query, w_key, w_value, num_heads, padding):
    queries, keys, values = _cross_heads(x, memory, w_query, w_key, w_value, num_heads)
    attn_scores = queries @ keys.mT / queries.shape[-1] ** 0.5
    attn_scores = attn_scores.masked_fill(_t(padding)[:, None, None, :], -torch.inf)  # [B, 1, 1, S]: every query
    weights = torch.softmax(attn_scores, dim=-1)
    return {"weights": _np(weights), "context": _np((weights @ values).transpose(-3, -2).flatten(-2))}


def cross_attention_flag(x, memory, w_query, w_key, w_value, num_heads, padding):
    queries, keys, values = _cross_heads(x, memory, w_query, w_key, w_value, num_heads)
    attend = ~_t(padding)[:, None, None, :]  # SDPA's bool mask: True = take part
    context = F.scaled_dot_product_attention(queries, keys, values, attn_mask=attend)
    return _np(context.transpose(-3, -2).flatten(-2))


def _relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """HF's T5Attention._relative_position_bucket, as it stands: the log in float32, truncated."""
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
    )
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


def _buckets(query_length, key_length, num_buckets, max_distance, bidirectional):
    context_position = torch.arange(query_length, dtype=torch.long)[:, None]
    memory_position = torch.arange(key_length, dtype=torch.long)[None, :]
    relative_position = memory_position - context_position  # shape (query_length, key_length)
    return _relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance)


def t5_relative_bias(query_length, key_length, num_buckets, max_distance, bidirectional):
    return _np(_buckets(query_length, key_length, num_buckets, max_distance, bidirectional))


def t5_attention(x, w_query, w_key, w_value, num_heads, bias_table, num_buckets, max_distance, bidirectional, causal):
    x = _t(x)
    T, H = x.shape[-2], w_query.shape[-1] // num_heads
    queries, keys, values = (_split_heads(x @ _t(w), num_heads, H) for w in (w_query, w_key, w_value))
    scores = queries @ keys.mT  # T5: no 1/sqrt(H)
    # compute_bias: the embedding of each bucket, [T, S, N] -> [1, N, T, S]
    position_bias = F.embedding(_buckets(T, T, num_buckets, max_distance, bidirectional), _t(bias_table))
    scores = scores + position_bias.permute([2, 0, 1]).unsqueeze(0)
    if causal:
        scores = scores.masked_fill(_causal_mask(T), -torch.inf)
    # HF's softmax(scores.float()).type_as(scores): float32 at least, float64 kept (T5's float32 there is no model's)
    weights = F.softmax(scores if scores.dtype == torch.float64 else scores.float(), dim=-1).type_as(scores)
    return {"weights": _np(weights), "context": _np((weights @ values).transpose(-3, -2).flatten(-2))}
