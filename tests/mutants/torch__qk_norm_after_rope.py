"""QK-norm after the rotation, where Qwen3, Gemma 3 and OLMo 2 norm before it: the root is the same (the rotation keeps
each pair's length), but each dim's weight meets the turned dims, not the ones it was trained on."""

import torch
import torch.nn.functional as F

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.norms import _attended, _own_rms_norm, _rms_norm
from attention_conformance.adapters.torch.rotary import _rotate
from attention_conformance.adapters.torch.shared import _np, _split_heads, _t

EXPECTED = "caught"
MUST_FAIL = ("qk_norm_qwen3_causal", "qk_norm_olmo2_causal", "qk_norm_wide_heads", "qk_norm_flag_qwen3_causal")


def _rotated_then_normed(norm, x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head):
    x = _t(x)
    H = w_query.shape[-1] // num_heads
    positions = torch.arange(x.shape[-2])
    queries, keys = (
        _rotate(_split_heads(x @ _t(w), num_heads, H), positions, "rotate_half", H) for w in (w_query, w_key)
    )
    if per_head:
        queries, keys = norm(queries, _t(norm_weight_q), eps), norm(keys, _t(norm_weight_k), eps)  # the bug: after
    else:
        queries, keys = (t.transpose(-3, -2).flatten(-2) for t in (queries, keys))
        queries, keys = norm(queries, _t(norm_weight_q), eps), norm(keys, _t(norm_weight_k), eps)
        queries, keys = (_split_heads(t, num_heads, H) for t in (queries, keys))
    return queries, keys, _split_heads(x @ _t(w_value), num_heads, H)


def qk_norm_attention(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
    args = (x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head)
    return _attended(*_rotated_then_normed(_rms_norm, *args), causal)


def qk_norm_flag(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
    args = (x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head)
    queries, keys, values = _rotated_then_normed(_own_rms_norm, *args)
    context = F.scaled_dot_product_attention(queries, keys, values, is_causal=causal)
    return {"queries": _np(queries), "context": _np(context.transpose(-3, -2).flatten(-2))}
