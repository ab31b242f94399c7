"""Packed documents without RoPE run through the rotated path (a port calling varlen_flag's code for a kernel that
takes q and k as they are). One-token documents, at position 0 where RoPE turns nothing, are right."""

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch import varlen_flag as _rotated_flag

EXPECTED = "caught"
MUST_FAIL = (
    "varlen_unrotated_three_documents_causal",
    "varlen_unrotated_three_documents",
    "varlen_unrotated_long_documents",
)


def varlen_unrotated_flag(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    return _rotated_flag(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal)  # the bug
