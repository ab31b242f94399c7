"""TensorFlow: the documents' own ops: the mapping table's rows, the whole pipeline, the module forms,
initialisation and the knobs, and training.
"""

import math

import keras
import tensorflow as tf

from .shared import _matmul, _np, _scaled_softmax, _t


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
    layer = SelfAttentionV2(d_out, dtype=w_query.dtype.name)
    layer.build((None, d_in))
    for dense, w in ((layer.W_query, w_query), (layer.W_key, w_key), (layer.W_value, w_value)):
        # Dense's kernel is [d_in, d_out]; the golden weights are nn.Linear's [d_out, d_in] (tf.transpose: traced too)
        dense.set_weights([tf.transpose(w)])
    return layer


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
