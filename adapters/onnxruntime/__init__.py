"""ONNX Runtime, the deployment path: the documents' attention written as ONNX graphs in the mapping
table's own terms (MatMul, Transpose with perm on the last two axes, Div by Sqrt(d_k), Softmax
axis -1), the standard Attention operator (opset 23) for the fused paths, and the PyTorch
document's SelfAttention_v1/_v2 modules exported with torch.onnx.export; every graph runs in
onnxruntime's CPU execution provider.

Added the way an outside adapter is: the template, this adapter and one tox environment; its known
divergences are data, in spec/divergences/<adapter>.yaml. Graphs are built with the onnx helper API, once
per op, dtype and input ranks (sizes stay symbolic), and their sessions reused: a session costs
milliseconds to create.
"""

import functools

import onnx
import onnxruntime as ort

from .bands import *
from .chunks import *
from .cross import *
from .documents import *
from .heads import *
from .logits import *
from .norms import *
from .rope_scaling import *
from .rotary import *
from .shared import _LEVEL, OPSET
from .varlen import *

# ORT rewrites a graph before it runs it (constant folding, node fusions, layout changes): its own compiler.
MODES = {
    "compiled": "graph optimisations at onnxruntime's highest level, ORT_ENABLE_ALL (its default)",
    "eager": "graph optimisations off, ORT_DISABLE_ALL: every node of the graph runs as written",
}
_LEVELS = {"compiled": ort.GraphOptimizationLevel.ORT_ENABLE_ALL, "eager": ort.GraphOptimizationLevel.ORT_DISABLE_ALL}


def in_mode(mode, op):
    @functools.wraps(op)
    def call(*args, **kwargs):
        _LEVEL[0] = _LEVELS[mode]  # sessions are cached per level: each mode keeps its own
        try:
            return op(*args, **kwargs)
        finally:
            _LEVEL[0] = _LEVELS["compiled"]

    return call


DTYPES = ("float32", "float64", "float16")


_NO_TRAINING = (
    "onnxruntime is an inference runtime: it computes no gradients, and onnxruntime-training (the training "
    "build) stopped at 1.19.2 (2024-09), with no release for this runtime or Python 3.11 wheels beside it"
)


NOT_APPLICABLE = {
    "sink_decode_paths": "opset 23's Attention operator takes no sinks",
    "fused_sink_attention": "opset 23's Attention operator takes no sinks",
    "fused_rotary/float64": "ONNX's RotaryEmbedding is defined for float, float16 and bfloat16 only (opset 23)",
    "scaled_rotary/float64": "ONNX's RotaryEmbedding is defined for float, float16 and bfloat16 only (opset 23)",
    "window_flag": (
        "opset 23's Attention operator has no sliding window (opset 25 adds one; onnxruntime 1.31 runs 23)"
    ),
    "band_flag": (
        "opset 23's Attention operator has no window, one-sided or two (opset 25 adds a sliding one; onnxruntime "
        "1.31 runs 23): band_attention builds the band as a mask"
    ),
    "bfloat16": (
        "onnxruntime 1.31's CPU execution provider has no bfloat16 kernel for MatMul, Div, Where or ReduceMax "
        "(measured: NOT_IMPLEMENTED)"
    ),
    "gradients": _NO_TRAINING,
    "sgd_step": _NO_TRAINING,
    "create_parameter": (
        "ONNX has no trainable parameter: an initializer is a constant to onnxruntime "
        "(the draw itself is the `draw` cases')"
    ),
    "parameters": "ONNX has no trainable parameter: an initializer is a constant to onnxruntime",
    "attention_module": (
        "ONNX has no attention layer holding weights: its Attention operator takes projected Q, K and V "
        "(the fused cases)"
    ),
    "layer_mask": (
        "ONNX has no attention layer holding weights: its Attention operator's attn_mask is the mask_conventions cases'"
    ),
    "layer_key_padding": "ONNX has no attention layer holding weights, so no key-padding argument",
    "grouped_attention_layer": (
        "ONNX has no attention layer holding weights: its Attention operator's fewer K/V heads are "
        "grouped_fused_attention's"
    ),
    "layer_defaults": "ONNX has no attention layer, so no constructor defaults",
}


def version():
    return f"onnxruntime {ort.__version__} (onnx {onnx.__version__}, opset {OPSET})"


def gradients(x, w_query, w_key, w_value, g, form):
    raise NotImplementedError(NOT_APPLICABLE["gradients"])


def sgd_step(x, w_query, w_key, w_value, g, lr):
    raise NotImplementedError(NOT_APPLICABLE["sgd_step"])


def create_parameter(d_in, d_out, seed):
    raise NotImplementedError(NOT_APPLICABLE["create_parameter"])


def parameters(d_in, d_out, form):
    raise NotImplementedError(NOT_APPLICABLE["parameters"])
