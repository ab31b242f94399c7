"""A chunk of queries after a cache through SDPA's causal flag: torch aligns it top-left, so the chunk's first query
sees only key 0 instead of keys 0..start (a chunked prefill's bug; the decode steps, one query each, stay right)."""

import torch
import torch.nn.functional as F

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.heads import _grouped_split
from attention_conformance.adapters.torch.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = (
    "paths_keys_64_65",
    "paths_keys_96_97",
    "paths_keys_128_129",
    "paths_keys_256_257",
    "paths_keys_512_513",
    "paths_chunk_61",
)


def decode_paths(x, w_query, w_key, w_value, num_heads, num_kv_heads, start):
    queries, keys, values = _grouped_split(_t(x), w_query, w_key, w_value, num_heads, num_kv_heads)
    T = keys.shape[-2]
    batched = F.scaled_dot_product_attention(queries[..., start:, :], keys, values, is_causal=True, enable_gqa=True)
    alone = [
        F.scaled_dot_product_attention(
            queries[..., p : p + 1, :], keys[..., : p + 1, :], values[..., : p + 1, :], enable_gqa=True
        )
        for p in range(start, T)
    ]
    return {"batched": _np(batched), "alone": _np(torch.cat(alone, dim=-2))}
