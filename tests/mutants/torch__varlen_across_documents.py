"""The packed row run as one causal sequence: the document mask dropped (Megatron-LM without reset_attention_mask),
positions still restarting. A token attends to the documents before its own; the first document, and a row of one
document, are right."""

import torch

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.shared import _np
from attention_conformance.adapters.torch.varlen import _rotated_heads

EXPECTED = "caught"
MUST_FAIL = ("varlen_three_documents_causal", "varlen_long_documents")


def varlen_attention(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    queries, keys, values = _rotated_heads(x, w_query, w_key, w_value, num_heads, cu_seqlens)
    T = queries.shape[-2]
    attn_scores = queries @ keys.mT / queries.shape[-1] ** 0.5
    if causal:  # the bug: the whole row's past, every document's
        attn_scores = attn_scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -torch.inf)
    weights = torch.softmax(attn_scores, dim=-1)
    context = (weights @ values).transpose(-3, -2).flatten(-2)
    return {"queries": _np(queries), "weights": _np(weights), "context": _np(context)}
