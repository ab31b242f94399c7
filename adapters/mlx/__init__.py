"""MLX (Apple's array framework; `mlx[cpu]` runs it on Linux), written in MLX's own idiom: mx.array,
`@`, `.swapaxes(-1, -2)`, mx.softmax, mlx.nn modules for the module forms, mx.grad and
mlx.optimizers.SGD for training, and the fused mx.fast.scaled_dot_product_attention ([B, N, T, H]).

Added the way an outside adapter is: the template, this adapter and one tox environment; its known
divergences are data, in spec/divergences/<adapter>.yaml. MLX is lazy: nothing is computed until an array
is read (np.array below), so every function's graph is evaluated once, at its return.
"""

import mlx.core as mx

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
    "cache_flag": (
        "mx.fast.scaled_dot_product_attention takes no KV cache (mlx-lm's KVCache concatenates before it, as "
        "causal_flag)"
    ),
    "softcap_flag": "mx.fast.scaled_dot_product_attention takes no soft cap",
    "attention_stages": "mx.fast.scaled_dot_product_attention returns its output alone, none of its scores",
    "packed_fused_attention": "mx.fast.scaled_dot_product_attention takes heads on their own axis [B, N, T, H]",
    "key_padding_flag": "mx.fast.scaled_dot_product_attention takes no key lengths: padding is its boolean mask",
    "window_flag": ("mx.fast.scaled_dot_product_attention takes no window (mlx-lm builds the band as a mask array)"),
    "band_flag": "mx.fast.scaled_dot_product_attention takes no window (band_attention builds the band as a mask)",
    "attention_layer": (
        "keras.layers.Attention's case; MLX's attention layer (nn.MultiHeadAttention) owns its projections"
    ),
    "layer_mha_averaged": "mlx.nn.MultiHeadAttention returns no attention weights, so none averaged over heads",
    "layer_mha_seq_first": "mlx.nn.MultiHeadAttention is batch-first only ([B, T, E])",
    "layer_key_padding": (
        "mlx.nn.MultiHeadAttention takes one additive mask and no key-padding argument (that mask is layer_mask's)"
    ),
    "grouped_attention_layer": (
        "mlx.nn has no grouped-query attention layer; grouped heads run through mx.fast.scaled_dot_product_attention"
    ),
}


def version():
    return f"mlx {mx.__version__}"


def devices():
    return ["cpu"] + ["gpu"] * mx.metal.is_available()


def attention_layer(x, w_query, w_key, w_value):
    raise NotImplementedError(NOT_APPLICABLE["attention_layer"])
