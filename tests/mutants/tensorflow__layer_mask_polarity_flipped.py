"""The suite's mask (True = hidden) handed to keras.layers.MultiHeadAttention's attention_mask, where 1 = attend."""

from attention_conformance import ports
from attention_conformance.adapters.tensorflow import *
from attention_conformance.adapters.tensorflow.layers import _keras_mha
from attention_conformance.adapters.tensorflow.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = ("mask_layer_padding_causal",)


def layer_mask(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, mask):
    weights = ports.reference_weights(w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    mha = _keras_mha(ports.to_layout("keras", weights, num_heads), num_heads, str(x.dtype))
    return _np(mha(_t(x), _t(x), attention_mask=_t(mask)))
