"""Sinks passed to the block of queries but not to a decode step's single query: each step's weights then sum to 1
where the sink should have taken its share (the kind of split MLX's vector kernel for a few queries can make)."""

import mlx.core as mx

from attention_conformance.adapters.mlx import *
from attention_conformance.adapters.mlx.shared import _heads, _mx, _np

EXPECTED = "caught"
MUST_FAIL = ("paths_sinks_keys_96_97", "paths_sinks_prefill_33")


def sink_decode_paths(x, w_query, w_key, w_value, num_heads, num_kv_heads, sinks, start):
    x = _mx(x)
    queries = _heads(x @ _mx(w_query), num_heads)
    keys, values = _heads(x @ _mx(w_key), num_kv_heads), _heads(x @ _mx(w_value), num_kv_heads)
    scale, T = queries.shape[-1] ** -0.5, keys.shape[-2]

    def attend(q, stop, mask, **own):
        return mx.fast.scaled_dot_product_attention(
            q, keys[..., :stop, :], values[..., :stop, :], scale=scale, mask=mask, **own
        )

    batched = attend(queries[..., start:, :], T, "causal", sinks=_mx(sinks))
    alone = [attend(queries[..., p : p + 1, :], p + 1, None) for p in range(start, T)]  # bug: no sinks
    return {"batched": _np(batched), "alone": _np(mx.concatenate(alone, axis=-2))}
