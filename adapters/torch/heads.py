"""PyTorch: past the documents' one head: masks, decoding with a cache, dropout, several heads and grouped heads."""

import torch
import torch.nn.functional as F
from torch import nn

from .shared import _causal_mask, _np, _split_heads, _t


def masked_attention(x, w_query, w_key, w_value, mask):
    x = _t(x)
    queries, keys, values = x @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    attn_scores = (queries @ keys.mT).masked_fill(_t(mask), -torch.inf)  # True = hidden
    attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
    return {"weights": _np(attn_weights), "context": _np(attn_weights @ values)}


def _fill(fill, dtype):
    return {"neg_inf": -torch.inf, "large_negative": -1e9, "dtype_min": torch.finfo(dtype).min}[fill]


def mask_conventions(x, w_query, w_key, w_value, mask, api, fill):
    x, hidden = _t(x), _t(mask)
    queries, keys, values = x @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    if api == "bool":  # SDPA's boolean attn_mask: True = the key takes part, the suite's opposite
        attn_mask = ~hidden
    else:  # a float mask added to the scores
        attn_mask = torch.zeros(hidden.shape, dtype=x.dtype).masked_fill(hidden, _fill(fill, x.dtype))
    return _np(F.scaled_dot_product_attention(queries, keys, values, attn_mask=attn_mask))


def causal_attention(x, w_query, w_key, w_value):
    return masked_attention(x, w_query, w_key, w_value, _np(_causal_mask(x.shape[-2])))


def _offset_causal_mask(T_q, T_k):
    # The query at absolute position p = T_k - T_q + i may see keys 0..p: the diagonal moves right.
    return torch.triu(torch.ones(T_q, T_k, dtype=torch.bool), diagonal=T_k - T_q + 1)


def decode_attention(x, w_query, w_key, w_value, start):
    x = _t(x)
    keys, values = x @ _t(w_key), x @ _t(w_value)
    queries = x[..., start:, :] @ _t(w_query)
    attn_scores = (queries @ keys.mT).masked_fill(_offset_causal_mask(queries.shape[-2], keys.shape[-2]), -torch.inf)
    context = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1) @ values
    # Token by token: the cache holds keys and values 0..p-1, the new token's are appended, and its
    # query attends over the whole cache: no mask, the future is not there yet.
    k_cache, v_cache, steps = keys[..., :start, :], values[..., :start, :], []
    for p in range(start, x.shape[-2]):
        token = x[..., p : p + 1, :]
        k_cache, v_cache = (
            torch.cat([k_cache, token @ _t(w_key)], dim=-2),
            torch.cat([v_cache, token @ _t(w_value)], dim=-2),
        )
        weights = torch.softmax((token @ _t(w_query)) @ k_cache.mT / k_cache.shape[-1] ** 0.5, dim=-1)
        steps.append(weights @ v_cache)
    return {"context": _np(context), "stepwise": _np(torch.cat(steps, dim=-2))}


def window_attention(x, w_query, w_key, w_value, window, start):
    x = _t(x)
    keys, values = x @ _t(w_key), x @ _t(w_value)
    queries = x[..., start:, :] @ _t(w_query)
    # Query p (absolute, from start) sees keys p-window+1..p: the future and the keys before the window hidden.
    p, j = torch.arange(start, x.shape[-2])[:, None], torch.arange(x.shape[-2])
    attn_scores = (queries @ keys.mT).masked_fill((j > p) | (j <= p - window), -torch.inf)
    weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
    return {"weights": _np(weights), "context": _np(weights @ values)}


def causal_flag(x, w_query, w_key, w_value, start):
    x = _t(x)
    queries, keys, values = x[..., start:, :] @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    return _np(F.scaled_dot_product_attention(queries, keys, values, is_causal=True))


def dropout(weights, p, seed):
    layer, weights = nn.Dropout(p), _t(weights)
    evaluated = layer.eval()(weights)
    torch.manual_seed(seed)
    return {"dropout_eval": _np(evaluated), "dropout_train": _np(layer.train()(weights))}


def multi_head_attention(x, w_query, w_key, w_value, w_out, num_heads, causal):
    x = _t(x)
    d_out = w_query.shape[1]
    head_dim = d_out // num_heads
    queries, keys, values = (_split_heads(x @ _t(w), num_heads, head_dim) for w in (w_query, w_key, w_value))
    attn_scores = queries @ keys.mT  # (.., N, T, T)
    if causal:
        attn_scores.masked_fill_(
            _causal_mask(x.shape[-2]), -torch.inf
        )  # in place, as the book's MultiHeadAttention does
    # Scaled in place too: at GPT-2's shape each (N, T, T) copy in float64 is 96 MiB.
    attn_weights = torch.softmax(attn_scores.div_(head_dim**0.5), dim=-1)
    heads = attn_weights @ values  # (.., N, T, H)
    merged = heads.transpose(-3, -2).reshape(*x.shape[:-1], d_out)  # (.., T, N*H)
    return {"heads": _np(heads), "context": _np(merged @ _t(w_out))}


def fused_attention(x, w_query, w_key, w_value, num_heads, causal):
    x = _t(x)
    head_dim = w_query.shape[1] // num_heads
    queries, keys, values = (_split_heads(x @ _t(w), num_heads, head_dim) for w in (w_query, w_key, w_value))
    return _np(F.scaled_dot_product_attention(queries, keys, values, is_causal=causal))


def _grouped_split(x, w_query, w_key, w_value, num_heads, num_kv_heads):
    head_dim = w_query.shape[1] // num_heads
    return tuple(
        _split_heads(x @ _t(w), n, head_dim)
        for w, n in ((w_query, num_heads), (w_key, num_kv_heads), (w_value, num_kv_heads))
    )


def grouped_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    x = _t(x)
    queries, keys, values = _grouped_split(x, w_query, w_key, w_value, num_heads, num_kv_heads)
    group = num_heads // num_kv_heads
    keys, values = keys.repeat_interleave(group, dim=-3), values.repeat_interleave(group, dim=-3)  # Llama's repeat_kv
    attn_scores = queries @ keys.mT
    if causal:
        attn_scores.masked_fill_(_causal_mask(x.shape[-2]), -torch.inf)
    return _np(torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1) @ values)


def grouped_fused_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    queries, keys, values = _grouped_split(_t(x), w_query, w_key, w_value, num_heads, num_kv_heads)
    return _np(F.scaled_dot_product_attention(queries, keys, values, is_causal=causal, enable_gqa=True))


def decode_paths(x, w_query, w_key, w_value, num_heads, num_kv_heads, start):
    queries, keys, values = _grouped_split(_t(x), w_query, w_key, w_value, num_heads, num_kv_heads)
    T = keys.shape[-2]
    if start:  # a chunk after a cache: the causal mask at the bottom right, as a bool mask (True = may attend)
        seen = torch.ones(T - start, T, dtype=torch.bool).tril(start)
        batched = F.scaled_dot_product_attention(queries[..., start:, :], keys, values, attn_mask=seen, enable_gqa=True)
    else:  # prefill: the causal flag, the path without a mask
        batched = F.scaled_dot_product_attention(queries, keys, values, is_causal=True, enable_gqa=True)
    alone = [
        F.scaled_dot_product_attention(
            queries[..., p : p + 1, :], keys[..., : p + 1, :], values[..., : p + 1, :], enable_gqa=True
        )
        for p in range(start, T)
    ]
    return {"batched": _np(batched), "alone": _np(torch.cat(alone, dim=-2))}
