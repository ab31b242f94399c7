"""A RoPE checkpoint converted as if the projection were one head: the permutation of pairs to halves applied across
every column of W_query and W_key at once, not within each head."""

from attention_conformance.adapters.mlx import *
from attention_conformance.adapters.mlx.rotary import _permuted, _rotary_context
from attention_conformance.adapters.mlx.shared import _mx

EXPECTED = "caught"
MUST_FAIL = ("rope_port", "rope_port_decode_chunk")


def rotary_port(x, w_query, w_key, w_value, num_heads, rotary_dim, start):
    x, w_query, w_key, w_value = _mx(x), _mx(w_query), _mx(w_key), _mx(w_value)
    width = w_query.shape[-1]
    converted = [_permuted(w, 1, width, pairs=True) for w in (w_query, w_key)]  # the bug: one head of every column
    restored = [_permuted(w, 1, width, pairs=False) for w in converted]

    def context(wq, wk, pairing):
        return _rotary_context(x, wq, wk, w_value, num_heads, pairing, rotary_dim, start)

    return {
        "interleaved": context(w_query, w_key, "interleaved"),
        "converted": context(*converted, "rotate_half"),
        "restored": context(*restored, "interleaved"),
    }
