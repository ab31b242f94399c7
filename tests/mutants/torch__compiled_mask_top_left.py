"""Under torch.compile, decoding's mask taken top-left: a branch on torch.compiler.is_compiling() that builds the
causal mask from the queries' own length, as a compiler-friendly path in model code does (transformers'
is_torchdynamo_compiling() branches choose the mask another way under tracing). Eager never takes it: only the
compiled column shows the bug."""

import torch

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.heads import _offset_causal_mask
from attention_conformance.adapters.torch.shared import _np, _t

RUN_MODE = "compiled"
EXPECTED = "caught"
MUST_FAIL = ("decode_chunk", "decode_one_token")


def decode_attention(x, w_query, w_key, w_value, start):
    x = _t(x)
    keys, values = x @ _t(w_key), x @ _t(w_value)
    queries = x[..., start:, :] @ _t(w_query)
    T_q, T_k = queries.shape[-2], keys.shape[-2]
    if torch.compiler.is_compiling():  # the bug: the square mask's diagonal, no offset for the cached keys
        hidden = torch.triu(torch.ones(T_q, T_k, dtype=torch.bool), diagonal=1)
    else:
        hidden = _offset_causal_mask(T_q, T_k)
    attn_scores = (queries @ keys.mT).masked_fill(hidden, -torch.inf)
    context = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1) @ values
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
