"""TensorFlow 2 with Keras 3, in the idiom of the TF.js document's right-hand column."""

import os

os.environ["KERAS_BACKEND"] = "tensorflow"  # this adapter is TensorFlow; Keras must not pick another backend
import keras
import tensorflow as tf

from .bands import *
from .chunks import *
from .cross import *
from .documents import *
from .heads import *
from .layers import *
from .logits import *
from .modes import MODES, in_mode
from .norms import *
from .rope_scaling import *
from .rotary import *
from .varlen import *

DTYPES = ("float32", "float64", "float16", "bfloat16")


NOT_APPLICABLE = {
    "sink_decode_paths": "keras.ops.dot_product_attention takes no sinks",
    "cache_flag": (
        "Keras's attention ops take no KV cache; a cache is the caller's concatenation (decode_attention's stepwise)"
    ),
    "softcap_flag": "TensorFlow's and Keras's attention ops take no soft cap",
    "fused_sink_attention": "TensorFlow's and Keras's attention ops take no sinks",
    "fused_rotary": (
        "TensorFlow has no RoPE kernel (keras-hub's RotaryEmbedding, not a dependency here, is written from these "
        "ops, rotary_embedding's)"
    ),
    "window_flag": "keras.ops.dot_product_attention and keras.layers.MultiHeadAttention take no sliding window",
    "band_flag": "keras.ops.dot_product_attention and keras.layers.MultiHeadAttention take no two-sided window",
    "attention_stages": "keras.ops.dot_product_attention returns its output alone, none of its scores",
    "packed_fused_attention": "keras.ops.dot_product_attention takes heads on their own axis [B, T, N, H], no counts",
    "key_padding_flag": "keras.ops.dot_product_attention takes no key lengths: padding is its boolean mask",
    "layer_mha_averaged": "keras.layers.MultiHeadAttention returns per-head scores only (no average_attn_weights)",
    "layer_mha_seq_first": "keras.layers.MultiHeadAttention is batch-first only",
}


def version():
    return f"tensorflow {tf.__version__}, keras {keras.__version__}"


def pin_numerics():
    tf.config.experimental.enable_tensor_float_32_execution(False)  # a GPU's float32 must be a CPU's
    return {"tensorflow.tensor_float_32_execution": tf.config.experimental.tensor_float_32_execution_enabled()}


def devices():
    return ["cpu"] + ["gpu"] * bool(tf.config.list_physical_devices("GPU"))
