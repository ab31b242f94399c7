"""Llama 4's L2Norm taken at its name: queries and keys divided by their L2 norm (torch's F.normalize), where
Llama4TextL2Norm divides by the root of their mean square; sqrt(H) apart, every RoPE layer's scores H times smaller."""

import torch
import torch.nn.functional as F

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.chunks import _wide
from attention_conformance.adapters.torch.rotary import _rotate
from attention_conformance.adapters.torch.shared import _np, _split_heads, _t

EXPECTED = "caught"
MUST_FAIL = ("llama4_rope_chunked", "llama4_rope_decode", "llama4_l2_norm_small")


def llama4_attention(
    x, w_query, w_key, w_value, num_heads, num_kv_heads, use_rope, chunk, floor_scale, attn_scale, eps, start
):
    x = _t(x)
    T, H, group = x.shape[-2], w_query.shape[-1] // num_heads, num_heads // num_kv_heads
    queries = _split_heads(x[..., start:, :] @ _t(w_query), num_heads, H)
    keys = _split_heads(x @ _t(w_key), num_kv_heads, H)
    values = _split_heads(x @ _t(w_value), num_kv_heads, H).repeat_interleave(group, -3)  # Llama's repeat_kv
    positions = torch.arange(T)  # cache_position: the queries' are start..T-1
    if use_rope:
        queries = F.normalize(_rotate(queries, positions[start:], "interleaved", H), dim=-1, eps=eps)  # the bug
        keys = F.normalize(_rotate(keys, positions, "interleaved", H), dim=-1, eps=eps)
    elif attn_scale:
        p = positions[start:].to(_wide(queries))
        scales = torch.log(torch.floor((p + 1.0) / floor_scale) + 1.0) * attn_scale + 1.0
        queries = (queries * scales[:, None]).to(queries.dtype)
    i, j = positions[start:, None], positions
    hidden = (j > i) | ((j // chunk != i // chunk) if use_rope and chunk else False)
    attn_scores = (queries @ keys.repeat_interleave(group, -3).mT / H**0.5).masked_fill(hidden, -torch.inf)
    context = torch.softmax(attn_scores, dim=-1) @ values
    return {"queries": _np(queries), "context": _np(context.transpose(-3, -2).flatten(-2))}
