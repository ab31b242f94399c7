"""TensorFlow.js, the second document's own framework, through one long-lived Node.js process.

The computation is adapters/tfjs_node/server.js, written in the document's idiom (tf.variable,
tf.matMul(q, k, false, true), tf.div, tf.softmax) on the WebAssembly backend (TFJS_BACKEND=cpu:
the pure-JS one). This file only starts it and moves float32 arrays across a pipe;
`npm ci --prefix adapters/tfjs_node` installs it.
"""

import atexit
import base64
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np

SERVER = Path(__file__).resolve().parent / "tfjs_node" / "server.js"
DTYPES = ("float32",)
_ONLY_FLOAT32 = "TensorFlow.js computes in float32 only"
# nn.Linear's counterpart, tf.layers.dense, comes with @tensorflow/tfjs (installed for its gradients).
_NO_V2 = "not built yet: the v2 form needs tf.layers.dense (installed with @tensorflow/tfjs, not written here)"
NOT_APPLICABLE = {
    "window_flag": "TensorFlow.js has no attention op, so no sliding-window switch",
    "cache_flag": "TensorFlow.js has no attention op, so no KV cache input",
    "float64": _ONLY_FLOAT32,
    "float16": _ONLY_FLOAT32,
    "bfloat16": _ONLY_FLOAT32,
    "self_attention_v2": _NO_V2,
    "exercise_3_1": _NO_V2,
    "erratum_same_start_v2": _NO_V2,
    "erratum_linear_init": _NO_V2,
    "v2_count": _NO_V2,
    "fused_attention": "TensorFlow.js has no fused attention kernel",
    "attention_layer": "keras.layers.Attention's case; TensorFlow.js core has no attention layer",
    "attention_module": (
        "TensorFlow.js has no multi-head attention layer (tfjs-layers 4.22 has none); GPT-2's block not built yet"
    ),
    "layer_defaults": "TensorFlow.js has no multi-head attention layer (tfjs-layers 4.22 has none)",
    "layer_mask": "TensorFlow.js has no multi-head attention layer (tfjs-layers 4.22 has none)",
    "layer_key_padding": "TensorFlow.js has no multi-head attention layer (tfjs-layers 4.22 has none)",
    "grouped_attention_layer": "TensorFlow.js has no grouped-query attention layer",
    "causal_flag": "TensorFlow.js has no attention op with a causal flag (masks are built with tf.linalg.bandPart)",
    "grouped_fused_attention": "TensorFlow.js has no fused attention kernel",
    "api=bool": "TensorFlow.js has no attention op taking a boolean mask (the textbook's tf.where is masked_attention)",
}

if shutil.which("node") is None:
    raise ImportError("the tfjs adapter needs Node.js on PATH")
if not (SERVER.parent / "node_modules" / "@tensorflow" / "tfjs").exists():  # the package server.js requires
    raise ImportError(f"TensorFlow.js is not installed: run `npm ci --prefix {SERVER.parent}`")

_node = subprocess.Popen(["node", str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
atexit.register(_node.kill)


def _to_wire(value):
    if isinstance(value, np.ndarray):
        dtype = "bool" if value.dtype == bool else "float32"
        data = value.astype(np.uint8 if dtype == "bool" else np.float32)
        return {"dtype": dtype, "shape": list(value.shape), "b64": base64.b64encode(data.tobytes()).decode()}
    return value


def _from_wire(value):
    if isinstance(value, dict) and "b64" in value:
        return np.frombuffer(base64.b64decode(value["b64"]), dtype=np.float32).reshape(value["shape"]).copy()
    return value


def _call(op, **args):
    _node.stdin.write(json.dumps({"op": op, "args": {k: _to_wire(v) for k, v in args.items()}}) + "\n")
    reply = json.loads(_node.stdout.readline())
    if "error" in reply:
        raise RuntimeError(f"TensorFlow.js {op}: {reply['error']}")
    out = reply["outputs"]
    return {k: _from_wire(v) for k, v in out.items()} if isinstance(out, dict) and "b64" not in out else _from_wire(out)


def version():
    return _call("version")


def create_parameter(d_in, d_out, seed):
    return _call("create_parameter", d_in=d_in, d_out=d_out, seed=seed)


def project(x, w):
    return _call("project", x=x, w=w)


def transposed_matmul(q, k):
    return _call("transposed_matmul", q=q, k=k)


def scale(scores, d_k):
    return _call("scale", scores=scores, d_k=d_k)


def softmax(scores):
    return _call("softmax", scores=scores)


def blend(weights, v):
    return _call("blend", weights=weights, v=v)


def dot_columns(x, w):
    return _call("dot_columns", x=x, w=w)


def attention(x, w_query, w_key, w_value):
    return _call("attention", x=x, w_query=w_query, w_key=w_key, w_value=w_value)


def self_attention_v1(x, w_query, w_key, w_value):
    return _call("self_attention_v1", x=x, w_query=w_query, w_key=w_key, w_value=w_value)


def self_attention_v2(x, w_query, w_key, w_value):
    raise NotImplementedError(NOT_APPLICABLE["self_attention_v2"])


def exercise_3_1(x, w_query, w_key, w_value):
    raise NotImplementedError(NOT_APPLICABLE["exercise_3_1"])


def parameters(d_in, d_out, form):
    if form != "v1":
        raise NotImplementedError(NOT_APPLICABLE["self_attention_v2"])
    return _call("parameters", d_in=d_in, d_out=d_out)


def causal_attention(x, w_query, w_key, w_value):
    return _call("causal_attention", x=x, w_query=w_query, w_key=w_key, w_value=w_value)


def masked_attention(x, w_query, w_key, w_value, mask):
    return _call("masked_attention", x=x, w_query=w_query, w_key=w_key, w_value=w_value, mask=mask)


def decode_attention(x, w_query, w_key, w_value, start):
    return _call("decode_attention", x=x, w_query=w_query, w_key=w_key, w_value=w_value, start=start)


def causal_flag(x, w_query, w_key, w_value, start):
    raise NotImplementedError(NOT_APPLICABLE["causal_flag"])


def grouped_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    return _call(
        "grouped_attention",
        x=x,
        w_query=w_query,
        w_key=w_key,
        w_value=w_value,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        causal=causal,
    )


def grouped_fused_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    raise NotImplementedError(NOT_APPLICABLE["grouped_fused_attention"])


def mask_conventions(x, w_query, w_key, w_value, mask, api, fill):
    if api == "bool":
        raise NotImplementedError(NOT_APPLICABLE["mask_padding_bool"])
    return _call("mask_additive", x=x, w_query=w_query, w_key=w_key, w_value=w_value, mask=mask, fill=fill)


def dropout(weights, p, seed):
    return _call("dropout", weights=weights, p=p, seed=seed)


def multi_head_attention(x, w_query, w_key, w_value, w_out, num_heads, causal):
    return _call(
        "multi_head_attention",
        x=x,
        w_query=w_query,
        w_key=w_key,
        w_value=w_value,
        w_out=w_out,
        num_heads=num_heads,
        causal=causal,
    )


def fused_attention(x, w_query, w_key, w_value, num_heads, causal):
    raise NotImplementedError(NOT_APPLICABLE["fused_attention"])


def attention_layer(x, w_query, w_key, w_value):
    raise NotImplementedError(NOT_APPLICABLE["attention_layer"])


def draw(distribution, n, seed):
    return _call("draw", distribution=distribution, n=n, seed=seed)


def initial_weights(d_in, d_out, form, seed):
    if form != "v1":
        raise NotImplementedError(NOT_APPLICABLE["self_attention_v2"])
    return _call("initial_weights", d_in=d_in, d_out=d_out, seed=seed)


def knobs_removed(x):
    return _call("knobs_removed", x=x)


def gradients(x, w_query, w_key, w_value, g, form):
    return _call("gradients", x=x, w_query=w_query, w_key=w_key, w_value=w_value, g=g, form=form)


def sgd_step(x, w_query, w_key, w_value, g, lr):
    return _call("sgd_step", x=x, w_query=w_query, w_key=w_key, w_value=w_value, g=g, lr=lr)
