"""The padded batch through SDPA with the causal mask alone, the padding's keys not hidden: a non-causal document
shorter than the longest attends to the zero rows after it (score 0, value 0), its weights spread thin. The packed
row, and a causal run (the padding comes after every real query), are right."""

import torch
import torch.nn.functional as F

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.shared import _np
from attention_conformance.adapters.torch.varlen import _attend, _rotated_heads

EXPECTED = "caught"
MUST_FAIL = ("varlen_flag_three_documents",)


def varlen_flag(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    queries, keys, values = _rotated_heads(x, w_query, w_key, w_value, num_heads, cu_seqlens)
    packed = F.scaled_dot_product_attention(queries, keys, values, attn_mask=_attend(cu_seqlens, causal))
    lengths = [int(n) for n in torch.as_tensor(cu_seqlens).diff()]
    longest = max(lengths)

    def batch(t):
        return torch.stack([F.pad(p, (0, 0, 0, longest - p.shape[-2])) for p in t[0].split(lengths, dim=-2)])

    context = F.scaled_dot_product_attention(batch(queries), batch(keys), batch(values), is_causal=causal)  # the bug
    padded = torch.cat([c[:, :n] for c, n in zip(context, lengths)], dim=-2)[None]
    return {"packed": _np(packed.transpose(-3, -2).flatten(-2)), "padded": _np(padded.transpose(-3, -2).flatten(-2))}
