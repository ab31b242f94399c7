"""ALiBi through FlexAttention with flash-attention's bias, -slope * |i - j| (its alibi_slopes docstring): the same as
BLOOM's slope * (j - i) under a causal mask, the mirror image for the keys after a query when there is none. Only the
compiled column runs flex_attention for alibi_flag (eager: SDPA with BLOOM's bias)."""

import torch

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch import alibi_flag as _real_alibi_flag
from attention_conformance.adapters.torch.flex import _flexed
from attention_conformance.adapters.torch.logits import _alibi_heads, _alibi_slopes
from attention_conformance.adapters.torch.shared import _np, _t

RUN_MODE = "compiled"
EXPECTED = "caught"
MUST_FAIL = ("alibi_flag_three_heads",)


def alibi_flag(x, w_query, w_key, w_value, num_heads, causal):
    if not torch.compiler.is_compiling():
        return _real_alibi_flag(x, w_query, w_key, w_value, num_heads, causal)
    x = _t(x)
    queries, keys, values = _alibi_heads(x, w_query, w_key, w_value, num_heads)
    slopes = _alibi_slopes(num_heads, x.dtype)
    context = _flexed(
        queries,
        keys,
        values,
        score_mod=lambda score, b, h, q, k: score - slopes[h] * (k - q).abs(),  # the bug: symmetric
        mask_mod=(lambda b, q, k: k <= q) if causal else None,
    )
    return _np(context.transpose(-3, -2).flatten(-2))
