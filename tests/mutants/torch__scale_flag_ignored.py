"""The scale argument dropped: SDPA's default 1/sqrt(H) where the model asked for its own (T5's 1.0, a muP 1/H)."""

import torch.nn.functional as F

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = ("scale_flag_one", "scale_flag_tenth_causal")


def scale_flag(x, w_query, w_key, w_value, softmax_scale, causal):
    x = _t(x)
    q, k, v = x @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    return _np(F.scaled_dot_product_attention(q, k, v, is_causal=causal))  # the bug: no scale=
