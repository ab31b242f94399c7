"""nn.Linear's [d_out, d_in] weights loaded into Dense's [d_in, d_out] kernel without the transpose."""

from attention_conformance.adapters.tensorflow import *
from attention_conformance.adapters.tensorflow.documents import SelfAttentionV2
from attention_conformance.adapters.tensorflow.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = ("v2_binary_square",)  # with d_in == d_out the kernel fits and is silently wrong


def _v2(w_query, w_key, w_value):
    d_out, d_in = w_query.shape
    layer = SelfAttentionV2(d_out, dtype=str(w_query.dtype))
    layer.build((None, d_in))
    for dense, w in ((layer.W_query, w_query), (layer.W_key, w_key), (layer.W_value, w_value)):
        dense.set_weights([w])
    return layer


def self_attention_v2(x, w_query, w_key, w_value):
    return _np(_v2(w_query, w_key, w_value)(_t(x)))
