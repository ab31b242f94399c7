"""The QK-norm's epsilon fixed at 1e-6 (mlx-lm's llama4.py: "mx.fast.rms_norm(queries, weight=None, eps=1e-6)"),
where transformers builds Llama4TextL2Norm(config.rms_norm_eps), 1e-5 in Llama 4's config; it shows where a head's mean
square is near the epsilon."""

from attention_conformance.adapters import torch as real
from attention_conformance.adapters.torch import *

EXPECTED = "caught"
MUST_FAIL = ("llama4_l2_norm_small",)


def llama4_attention(
    x, w_query, w_key, w_value, num_heads, num_kv_heads, use_rope, chunk, floor_scale, attn_scale, eps, start
):
    eps = 1e-6  # the bug: the given epsilon ignored
    return real.llama4_attention(
        x, w_query, w_key, w_value, num_heads, num_kv_heads, use_rope, chunk, floor_scale, attn_scale, eps, start
    )
