"""A decode step that counts its cache one short: the query's own key, just written, left out of
key_value_seq_lengths (the off-by-one of a decode kernel reading the cache before the step's write lands)."""

import jax.numpy as jnp
import numpy as np

from attention_conformance.adapters.jax import *
from attention_conformance.adapters.jax.heads import _fused_block
from attention_conformance.adapters.jax.shared import _split_last

EXPECTED = "caught"
MUST_FAIL = (
    "paths_keys_64_65",
    "paths_keys_96_97",
    "paths_keys_128_129",
    "paths_keys_256_257",
    "paths_keys_512_513",
    "paths_prefill_31",
    "paths_prefill_33",
    "paths_chunk_61",
)  # not paths_one_query_4096: one key missing of 4096 moves the context less than float32's rounding of the sum


def decode_paths(x, w_query, w_key, w_value, num_heads, num_kv_heads, start):
    x = jnp.asarray(x)
    head_dim = w_query.shape[1] // num_heads
    queries, keys, values = (
        _split_last(x @ jnp.asarray(w), n, head_dim)
        for w, n in ((w_query, num_heads), (w_key, num_kv_heads), (w_value, num_kv_heads))
    )
    B, T = keys.shape[0], keys.shape[-3]
    seen = jnp.tril(jnp.ones((T - start, T), dtype=bool), start)
    batched = _fused_block(queries[..., start:, :, :], keys, values, seen, None, False)
    alone = [
        _fused_block(queries[..., p : p + 1, :, :], keys, values, None, jnp.full((B,), max(p, 1), jnp.int32), False)
        for p in range(start, T)
    ]  # bug: p keys, not p + 1 (max(.., 1): a first query with none would be NaN, caught anyway)
    return {"batched": np.swapaxes(batched, -3, -2), "alone": np.swapaxes(np.concatenate(alone, axis=-3), -3, -2)}
