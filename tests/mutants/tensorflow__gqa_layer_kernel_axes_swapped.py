"""W_key and W_value reshaped into keras.layers.GroupQueryAttention's [E, K, H] kernels as if their
columns were [H, K] (head-minor): every K/V head gets one column of each head."""

import numpy as np
import tensorflow as tf

from attention_conformance.adapters.tensorflow import *
from attention_conformance.adapters.tensorflow.layers import _keras_gqa, _keras_name
from attention_conformance.adapters.tensorflow.shared import _batched, _np

EXPECTED = "caught"
MUST_FAIL = ("gqa_layer",)  # with one K/V head both orders are the same reshape


@_batched
def grouped_attention_layer(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    E, head_dim = x.shape[-1], w_query.shape[1] // num_heads
    layer = _keras_gqa(E, num_heads, num_kv_heads, str(w_query.dtype))
    kernels = {
        "query/kernel": w_query.reshape(E, num_heads, head_dim),
        "key/kernel": w_key.reshape(E, head_dim, num_kv_heads).transpose(0, 2, 1),
        "value/kernel": w_value.reshape(E, head_dim, num_kv_heads).transpose(0, 2, 1),
        "attention_output/kernel": np.eye(E, dtype=w_query.dtype).reshape(num_heads, head_dim, E),
    }
    for variable in layer.weights:
        variable.assign(kernels[_keras_name(variable)])
    merged = layer(x, x, use_causal_mask=causal)
    return _np(tf.transpose(tf.reshape(merged, x.shape[:-1] + [num_heads, head_dim]), [0, 2, 1, 3]))
