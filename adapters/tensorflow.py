"""TensorFlow 2 with Keras 3, in the idiom of the TF.js document's right-hand column."""

import functools
import math
import os

os.environ["KERAS_BACKEND"] = "tensorflow"  # this adapter is TensorFlow; Keras must not pick another backend

import keras
import numpy as np
import tensorflow as tf

from attention_conformance import ports

DTYPES = ("float32", "float64", "float16", "bfloat16")
NOT_APPLICABLE = {
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


def _t(a):
    return tf.constant(np.asarray(a))


def _np(t):
    return t.numpy()


def _matmul(a, b):
    # tf.linalg.matmul needs rank >= 2 on both sides: one token is a [1, d_in] row.
    if a.shape.rank == 1:
        return tf.linalg.matmul(a[tf.newaxis], b)[0]
    return tf.linalg.matmul(a, b)


def _batched(fn):
    """One sequence [T, D] runs as a batch of one: the 4-D transposes and keras.ops want [B, T, ..]."""

    @functools.wraps(fn)
    def call(x, *args, **kwargs):
        out = fn(_t(x) if len(np.shape(x)) == 3 else _t(x)[tf.newaxis], *args, **kwargs)
        return out if len(np.shape(x)) == 3 else out[0]

    return call


def _scaled_softmax(attn_scores, keys):
    d_k = keys.shape[-1]
    return tf.nn.softmax(tf.math.divide(attn_scores, math.sqrt(d_k)), axis=-1)


class SelfAttentionV1(tf.Module):
    def __init__(self, w_query, w_key, w_value, trainable=True):
        super().__init__()
        self.W_query = tf.Variable(w_query, trainable=trainable)
        self.W_key = tf.Variable(w_key, trainable=trainable)
        self.W_value = tf.Variable(w_value, trainable=trainable)

    def __call__(self, x):
        queries = _matmul(x, self.W_query)  # (.., T, H)
        keys = _matmul(x, self.W_key)
        values = _matmul(x, self.W_value)
        attn_scores = tf.linalg.matmul(queries, keys, transpose_b=True)  # tf.matMul(q, k, false, true)
        return tf.linalg.matmul(_scaled_softmax(attn_scores, keys), values)


class SelfAttentionV2(keras.layers.Layer):
    def __init__(self, d_out, **kwargs):
        super().__init__(**kwargs)
        self.W_query = keras.layers.Dense(d_out, use_bias=False, dtype=self.dtype)
        self.W_key = keras.layers.Dense(d_out, use_bias=False, dtype=self.dtype)
        self.W_value = keras.layers.Dense(d_out, use_bias=False, dtype=self.dtype)

    def build(self, input_shape):
        for dense in (self.W_query, self.W_key, self.W_value):
            dense.build(input_shape)

    def call(self, x):
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        attn_scores = tf.linalg.matmul(queries, keys, transpose_b=True)
        return tf.linalg.matmul(_scaled_softmax(attn_scores, keys), values)


def _v2(w_query, w_key, w_value):
    d_out, d_in = w_query.shape
    layer = SelfAttentionV2(d_out, dtype=str(w_query.dtype))
    layer.build((None, d_in))
    for dense, w in ((layer.W_query, w_query), (layer.W_key, w_key), (layer.W_value, w_value)):
        dense.set_weights([w.T])  # Dense's kernel is [d_in, d_out]; the golden weights are nn.Linear's [d_out, d_in]
    return layer


# --- the mapping-table rows -------------------------------------------------


def create_parameter(d_in, d_out, seed):
    # The table's tf.randomNormal draws N(0, 1); the conforming counterpart of torch.rand is uniform.
    parameter = tf.Variable(tf.random.Generator.from_seed(seed).uniform([d_in, d_out]))
    return {"parameter": _np(parameter), "trainable": parameter.trainable}


def project(x, w):
    return _np(_matmul(_t(x), _t(w)))


def transposed_matmul(q, k):
    return _np(tf.linalg.matmul(_t(q), _t(k), transpose_b=True))


def scale(scores, d_k):
    return _np(tf.math.divide(_t(scores), math.sqrt(d_k)))


def softmax(scores):
    return _np(tf.nn.softmax(_t(scores), axis=-1))


def blend(weights, v):
    return _np(tf.linalg.matmul(_t(weights), _t(v)))


def dot_columns(x, w):
    x, w = _t(x), _t(w)
    return _np(tf.stack([tf.tensordot(x, w[:, j], axes=1) for j in range(w.shape[1])]))


# --- the whole pipeline and the module forms ---------------------------------


def attention(x, w_query, w_key, w_value):
    x, Wq, Wk, Wv = _t(x), tf.Variable(w_query), tf.Variable(w_key), tf.Variable(w_value)
    Q = _matmul(x, Wq)
    K = _matmul(x, Wk)
    V = _matmul(x, Wv)
    scores = tf.linalg.matmul(Q, K, transpose_b=True)
    weights = _scaled_softmax(scores, K)
    context = tf.linalg.matmul(weights, V)
    outputs = {"query": Q, "key": K, "value": V, "scores": scores, "weights": weights, "context": context}
    return {name: _np(t) for name, t in outputs.items()} | {"d_k": K.shape[-1]}


def self_attention_v1(x, w_query, w_key, w_value):
    tracked = SelfAttentionV1(w_query, w_key, w_value)(_t(x))
    frozen = SelfAttentionV1(w_query, w_key, w_value, trainable=False)(_t(x))
    return {"context": _np(tracked), "context_no_grad": _np(frozen)}


def self_attention_v2(x, w_query, w_key, w_value):
    return _np(_v2(w_query, w_key, w_value)(_t(x)))


def exercise_3_1(x, w_query, w_key, w_value):
    sa_v2 = _v2(w_query, w_key, w_value)
    # Dense already holds [d_in, d_out], v1's layout: in Keras the copy needs no transpose.
    sa_v1 = SelfAttentionV1(sa_v2.W_query.kernel, sa_v2.W_key.kernel, sa_v2.W_value.kernel)
    return {"context": _np(sa_v1(_t(x))), "context_v2": _np(sa_v2(_t(x)))}


def parameters(d_in, d_out, form):
    if form == "v1":
        w = [tf.random.uniform([d_in, d_out]) for _ in range(3)]
        variables = SelfAttentionV1(*w).variables
    else:
        layer = SelfAttentionV2(d_out)
        layer.build((None, d_in))
        variables = layer.weights
    return {
        "count": int(sum(math.prod(v.shape) for v in variables)),
        "trainable": [bool(v.trainable) for v in variables],
    }


# --- masks, dropout and heads ---------------------------------------------------


def _masked_weights(attn_scores, keys, hidden):
    attn_scores = tf.where(hidden, tf.constant(-math.inf, attn_scores.dtype), attn_scores)  # True = hidden
    return _scaled_softmax(attn_scores, keys)


def masked_attention(x, w_query, w_key, w_value, mask):
    x = _t(x)
    Q, K, V = _matmul(x, _t(w_query)), _matmul(x, _t(w_key)), _matmul(x, _t(w_value))
    weights = _masked_weights(tf.linalg.matmul(Q, K, transpose_b=True), K, _t(mask))
    return {"weights": _np(weights), "context": _np(tf.linalg.matmul(weights, V))}


@_batched
def mask_conventions(x, w_query, w_key, w_value, mask, api, fill):
    hidden = _t(mask) if len(np.shape(mask)) == 3 else _t(mask)[tf.newaxis]
    # keras.ops.dot_product_attention takes [B, T, N, H] and masks [B, N, T, S]: one head here.
    Q, K, V = (_matmul(x, _t(w))[..., tf.newaxis, :] for w in (w_query, w_key, w_value))
    if api == "bool":  # its boolean mask: True = the key takes part, the suite's opposite
        out = keras.ops.dot_product_attention(Q, K, V, mask=tf.logical_not(hidden)[:, tf.newaxis])
    else:  # its additive `bias`
        value = {"neg_inf": -np.inf, "large_negative": -1e9, "dtype_min": x.dtype.min}[fill]
        bias = tf.where(hidden, tf.constant(value, x.dtype), tf.zeros([], x.dtype))[:, tf.newaxis]
        out = keras.ops.dot_product_attention(Q, K, V, bias=bias)
    return _np(out[..., 0, :])


def _causal_mask(T):
    return tf.linalg.band_part(tf.ones([T, T]), -1, 0) == 0  # outside the lower band: the future


def causal_attention(x, w_query, w_key, w_value):
    return masked_attention(x, w_query, w_key, w_value, _np(_causal_mask(x.shape[-2])))


# --- decoding: queries start..T-1 over a cache of keys 0..T-1 -----------------------------------


def _offset_causal_mask(T_q, T_k):
    # The query at absolute position p = T_k - T_q + i may see keys 0..p: the band moves right.
    return tf.linalg.band_part(tf.ones([T_q, T_k]), -1, T_k - T_q) == 0


def decode_attention(x, w_query, w_key, w_value, start):
    x = _t(x)
    K, V = _matmul(x, _t(w_key)), _matmul(x, _t(w_value))
    Q = _matmul(x[..., start:, :], _t(w_query))
    weights = _masked_weights(
        tf.linalg.matmul(Q, K, transpose_b=True), K, _offset_causal_mask(Q.shape[-2], K.shape[-2])
    )
    # Token by token: append the new token's key and value to the cache, attend over all of it.
    k_cache, v_cache, steps = K[..., :start, :], V[..., :start, :], []
    for p in range(start, x.shape[-2]):
        token = x[..., p : p + 1, :]
        k_cache = tf.concat([k_cache, _matmul(token, _t(w_key))], axis=-2)
        v_cache = tf.concat([v_cache, _matmul(token, _t(w_value))], axis=-2)
        step = _scaled_softmax(tf.linalg.matmul(_matmul(token, _t(w_query)), k_cache, transpose_b=True), k_cache)
        steps.append(tf.linalg.matmul(step, v_cache))
    return {"context": _np(tf.linalg.matmul(weights, V)), "stepwise": _np(tf.concat(steps, axis=-2))}


def causal_flag(x, w_query, w_key, w_value, start):
    x = _t(x)
    batched = len(x.shape) == 3
    if not batched:
        x = x[tf.newaxis]  # keras.ops.dot_product_attention takes 4-D [B, T, N, H] only
    Q, K, V = (
        _matmul(t, _t(w))[..., tf.newaxis, :] for t, w in ((x[..., start:, :], w_query), (x, w_key), (x, w_value))
    )
    heads = keras.ops.dot_product_attention(Q, K, V, is_causal=True)[..., 0, :]  # [B, T, N=1, H]
    return _np(heads if batched else heads[0])


def dropout(weights, p, seed):
    layer, weights = keras.layers.Dropout(p, seed=seed), _t(weights)
    return {"dropout_eval": _np(layer(weights, training=False)), "dropout_train": _np(layer(weights, training=True))}


def _swap_tokens_and_heads(rank):  # (.., T, N, H) <-> (.., N, T, H): tf.transpose's perm names every axis
    return list(range(rank - 3)) + [rank - 2, rank - 3, rank - 1]


def _split_last(t, n, head_dim):  # (.., T, n*H) -> (.., T, n, H): keras.ops.dot_product_attention's layout
    return tf.reshape(t, t.shape[:-1] + [n, head_dim])


def _split_heads(t, n, head_dim):  # (.., T, n*H) -> (.., n, T, H): one (T, H) block per head
    return tf.transpose(_split_last(t, n, head_dim), _swap_tokens_and_heads(len(t.shape) + 1))


def multi_head_attention(x, w_query, w_key, w_value, w_out, num_heads, causal):
    x = _t(x)
    d_out = w_query.shape[1]
    head_dim = d_out // num_heads
    Q, K, V = (_split_heads(_matmul(x, _t(w)), num_heads, head_dim) for w in (w_query, w_key, w_value))
    scores = tf.linalg.matmul(Q, K, transpose_b=True)
    weights = _masked_weights(scores, K, _causal_mask(x.shape[-2])) if causal else _scaled_softmax(scores, K)
    heads = tf.linalg.matmul(weights, V)  # (.., N, T, H)
    merged = tf.reshape(tf.transpose(heads, _swap_tokens_and_heads(len(heads.shape))), x.shape[:-1] + [d_out])
    return {"heads": _np(heads), "context": _np(_matmul(merged, _t(w_out)))}


# --- what the documents say about initialisation and the knobs ---------------------


def draw(distribution, n, seed):
    generator = tf.random.Generator.from_seed(seed)
    return _np(generator.uniform([n]) if distribution == "uniform" else generator.normal([n]))  # tf.randomNormal


def initial_weights(d_in, d_out, form, seed):
    if form == "v1":
        generator = tf.random.Generator.from_seed(seed)
        module = SelfAttentionV1(*(generator.uniform([d_in, d_out]) for _ in range(3)))
        params = module.W_query, module.W_key, module.W_value
    else:
        keras.utils.set_random_seed(seed)
        layer = SelfAttentionV2(d_out)  # Dense's default kernel initializer
        layer.build((None, d_in))
        params = (
            tf.transpose(dense.kernel) for dense in (layer.W_query, layer.W_key, layer.W_value)
        )  # as [d_out, d_in]
    return dict(zip(("w_query", "w_key", "w_value"), map(_np, params)))


def knobs_removed(x):
    x = _t(x)
    d = x.shape[-1]
    eye = tf.eye(d)

    def attend(q, k, v, scaled):
        scores = tf.linalg.matmul(q, k, transpose_b=True)
        return tf.linalg.matmul(tf.nn.softmax(tf.math.divide(scores, math.sqrt(d)) if scaled else scores, axis=-1), v)

    Q = K = V = _matmul(x, eye)
    return {
        "part6": _np(attend(x, x, x, False)),
        "part6_scaled": _np(attend(x, x, x, True)),
        "part7_identity": _np(SelfAttentionV1(eye, eye, eye)(x)),
        "part7_identity_unscaled": _np(attend(Q, K, V, False)),
    }


def fused_attention(x, w_query, w_key, w_value, num_heads, causal):
    x = _t(x)
    batched = len(x.shape) == 3
    if not batched:
        x = x[tf.newaxis]  # keras.ops.dot_product_attention takes 4-D [B, T, N, H] only
    head_dim = w_query.shape[1] // num_heads
    Q, K, V = (_split_last(_matmul(x, _t(w)), num_heads, head_dim) for w in (w_query, w_key, w_value))
    heads = tf.transpose(keras.ops.dot_product_attention(Q, K, V, is_causal=causal), [0, 2, 1, 3])  # (B, N, T, H)
    return _np(heads if batched else heads[0])


@_batched
def grouped_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    head_dim = w_query.shape[1] // num_heads
    group = num_heads // num_kv_heads
    Q = _split_heads(_matmul(x, _t(w_query)), num_heads, head_dim)
    K, V = (
        tf.repeat(_split_heads(_matmul(x, _t(w)), num_kv_heads, head_dim), group, axis=1)  # each head in place
        for w in (w_key, w_value)
    )
    scores = tf.linalg.matmul(Q, K, transpose_b=True)
    weights = _masked_weights(scores, K, _causal_mask(x.shape[-2])) if causal else _scaled_softmax(scores, K)
    return _np(tf.linalg.matmul(weights, V))


@_batched
def grouped_fused_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    head_dim = w_query.shape[1] // num_heads
    Q, K, V = (
        _split_last(_matmul(x, _t(w)), n, head_dim)
        for w, n in ((w_query, num_heads), (w_key, num_kv_heads), (w_value, num_kv_heads))
    )
    heads = keras.ops.dot_product_attention(Q, K, V, is_causal=causal)  # [B, T, N, H]; fewer K/V heads allowed
    return _np(tf.transpose(heads, [0, 2, 1, 3]))


@functools.cache
def _keras_gqa(embed_dim, num_heads, num_kv_heads, dtype):
    """keras.layers.GroupQueryAttention without biases, built once per shape and dtype."""
    layer = keras.layers.GroupQueryAttention(
        embed_dim // num_heads, num_heads, num_kv_heads, use_bias=False, dtype=dtype
    )
    layer.build((None, None, embed_dim), (None, None, embed_dim))
    return layer


@_batched
def grouped_attention_layer(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    E, head_dim = x.shape[-1], w_query.shape[1] // num_heads  # the identity below needs N * H = E, as in the spec
    layer = _keras_gqa(E, num_heads, num_kv_heads, str(w_query.dtype))
    # EinsumDense kernels: query [E, N, H], key and value [E, K, H] (head n is columns n*H:(n+1)*H);
    # the output projection [N, H, E] is the identity, so the layer returns the heads side by side.
    kernels = {
        "query/kernel": w_query.reshape(E, num_heads, head_dim),
        "key/kernel": w_key.reshape(E, num_kv_heads, head_dim),
        "value/kernel": w_value.reshape(E, num_kv_heads, head_dim),
        "attention_output/kernel": np.eye(E, dtype=w_query.dtype).reshape(num_heads, head_dim, E),
    }
    for variable in layer.weights:
        variable.assign(kernels[_keras_name(variable)])
    merged = layer(x, x, use_causal_mask=causal)  # [B, T, N * H]
    return _np(_split_heads(merged, num_heads, head_dim))


def attention_layer(x, w_query, w_key, w_value):
    x = _t(x)
    Q, K, V = _matmul(x, _t(w_query)), _matmul(x, _t(w_key)), _matmul(x, _t(w_value))
    # Keras orders the inputs [query, value, key] and, with use_scale=False (the default), does not scale.
    return _np(keras.layers.Attention(dtype=str(w_query.dtype))([Q[tf.newaxis], V[tf.newaxis], K[tf.newaxis]])[0])


# --- the layers checkpoints are loaded into (attention_conformance.ports: every layout) -------


@functools.cache
def _keras_layer(embed_dim, num_heads, dtype):
    """keras.layers.MultiHeadAttention, built once per shape and dtype (a build costs ~60 ms, measured);
    its defaults (use_bias=True, dropout=0.0) are what a checkpoint of it holds."""
    layer = keras.layers.MultiHeadAttention(num_heads, key_dim=embed_dim // num_heads, dtype=dtype)
    layer.build((None, None, embed_dim), (None, None, embed_dim))
    return layer


def _keras_name(variable):
    return variable.path.split("/", 1)[1]  # '<layer>/query/kernel' -> 'query/kernel', ports' Keras layout


def _keras_weights(layer):
    return {_keras_name(v): v.numpy() for v in layer.weights}


def _keras_mha(state, num_heads, dtype):
    """That layer holding a Keras-layout checkpoint: every weight assigned by its path ('<layer>/query/kernel')."""
    layer = _keras_layer(state["attention_output/bias"].shape[0], num_heads, dtype)
    for variable in layer.weights:
        variable.assign(state[_keras_name(variable)])
    return layer


def _gpt2_attention(x, state, num_heads, causal):
    """GPT-2's attention block: one packed c_attn projection (Conv1D: x @ W + b) split into q, k, v."""
    c_attn_w, c_attn_b, c_proj_w, c_proj_b = (
        _t(state[k]) for k in ("c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias")
    )
    E = x.shape[-1]
    head_dim = E // num_heads
    Q, K, V = (_split_heads(t, num_heads, head_dim) for t in tf.split(_matmul(x, c_attn_w) + c_attn_b, 3, axis=-1))
    scores = tf.linalg.matmul(Q, K, transpose_b=True)
    weights = _masked_weights(scores, K, _causal_mask(x.shape[-2])) if causal else _scaled_softmax(scores, K)
    merged = tf.reshape(tf.transpose(tf.linalg.matmul(weights, V), [0, 2, 1, 3]), x.shape)
    held = {"c_attn.weight": c_attn_w, "c_attn.bias": c_attn_b, "c_proj.weight": c_proj_w, "c_proj.bias": c_proj_b}
    return _matmul(merged, c_proj_w) + c_proj_b, weights, held


def _layer_outputs(x, state, num_heads, causal, layer):
    """Run `layer` holding `state` (GPT-2's layout for "gpt2", Keras's otherwise) on x."""
    if layer == "gpt2":
        context, attn_weights, held = _gpt2_attention(_t(x), state, num_heads, causal)
        saved = {k: _np(v) for k, v in held.items()}
    elif layer == "mha":
        mha = _keras_mha(state, num_heads, str(x.dtype))
        context, attn_weights = mha(_t(x), _t(x), use_causal_mask=causal, return_attention_scores=True)
        saved = _keras_weights(mha)
    else:
        raise NotImplementedError(NOT_APPLICABLE[f"layer_{layer}"])
    return {
        "context": _np(context),
        "weights": _np(attn_weights),
        "round_trip": ports.flat(ports.from_layout(ports.layer_layout(layer, "keras"), saved, num_heads)),
    }


def attention_module(
    x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, causal, layer, checkpoint
):
    weights = (w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    return _layer_outputs(
        x, ports.layer_state(checkpoint, layer, "keras", num_heads, *weights), num_heads, causal, layer
    )


def layer_mask(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, mask):
    weights = ports.reference_weights(w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    mha = _keras_mha(ports.to_layout("keras", weights, num_heads), num_heads, str(x.dtype))
    # attention_mask [B, T, S]: 1 = attend, the suite's opposite
    return _np(mha(_t(x), _t(x), attention_mask=tf.logical_not(_t(mask))))


def layer_key_padding(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, padding, causal):
    weights = ports.reference_weights(w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    mha = _keras_mha(ports.to_layout("keras", weights, num_heads), num_heads, str(x.dtype))
    # value_mask [B, S]: True = a real token (Keras's masking convention), the suite's opposite
    return _np(mha(_t(x), _t(x), value_mask=tf.logical_not(_t(padding)), use_causal_mask=causal))


def layer_defaults(d_in, num_heads, seed):
    keras.utils.set_random_seed(seed)
    layer = keras.layers.MultiHeadAttention(num_heads, key_dim=d_in // num_heads)
    layer.build((None, None, d_in), (None, None, d_in))
    config = layer.get_config()
    w_query = ports.from_layout("keras", _keras_weights(layer), num_heads)["w_query"]
    # return_attention_scores gives the (B, N, T, S) scores per head; there is no averaging switch.
    return {
        "bias": config["use_bias"],
        "dropout": float(config["dropout"]),
        "averaged_weights": False,
        "w_query": w_query,
    }


# --- training ------------------------------------------------------------------


def gradients(x, w_query, w_key, w_value, g, form):
    x = _t(x)
    if form == "v1":
        module = SelfAttentionV1(w_query, w_key, w_value)
        variables = [module.W_query, module.W_key, module.W_value]
    else:
        module = _v2(w_query, w_key, w_value)
        variables = [module.W_query.kernel, module.W_key.kernel, module.W_value.kernel]
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(module(x) * _t(g))
    *grads, grad_x = tape.gradient(loss, variables + [x])
    if form == "v2":  # Dense kernels are [d_in, d_out]: back to the nn.Linear layout the weights came in
        grads = [tf.transpose(grad) for grad in grads]
    return {
        "grad_w_query": _np(grads[0]),
        "grad_w_key": _np(grads[1]),
        "grad_w_value": _np(grads[2]),
        "grad_x": _np(grad_x),
    }


def sgd_step(x, w_query, w_key, w_value, g, lr):
    module = SelfAttentionV1(w_query, w_key, w_value)
    variables = [module.W_query, module.W_key, module.W_value]
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(module(_t(x)) * _t(g))
    grads = tape.gradient(loss, variables)
    keras.optimizers.SGD(learning_rate=lr).apply_gradients(zip(grads, variables))
    return {"w_query": _np(module.W_query), "w_key": _np(module.W_key), "w_value": _np(module.W_value)}
