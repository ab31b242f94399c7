"""MLX: the documents' own ops: the mapping table's rows, the whole pipeline, the module forms,
initialisation and the knobs, and training.
"""

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
import numpy as np
from mlx.utils import tree_flatten

from .shared import _mx, _np


class SelfAttention_v1(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.W_query = mx.random.uniform(shape=(d_in, d_out))  # an array attribute is a parameter
        self.W_key = mx.random.uniform(shape=(d_in, d_out))
        self.W_value = mx.random.uniform(shape=(d_in, d_out))

    def __call__(self, x):
        queries = x @ self.W_query
        keys = x @ self.W_key
        values = x @ self.W_value
        attn_scores = queries @ keys.swapaxes(-1, -2)  # keys.T would reverse every axis of a batch
        attn_weights = mx.softmax(attn_scores / keys.shape[-1] ** 0.5, axis=-1)
        return attn_weights @ values


class SelfAttention_v2(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)  # weight [d_out, d_in], as nn.Linear in torch
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def __call__(self, x):
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        attn_scores = queries @ keys.swapaxes(-1, -2)
        attn_weights = mx.softmax(attn_scores / keys.shape[-1] ** 0.5, axis=-1)
        return attn_weights @ values


def _v1(w_query, w_key, w_value):
    module = SelfAttention_v1(*np.shape(w_query))
    module.load_weights([("W_query", _mx(w_query)), ("W_key", _mx(w_key)), ("W_value", _mx(w_value))])
    return module


def _v2(w_query, w_key, w_value):
    d_out, d_in = np.shape(w_query)  # nn.Linear's [d_out, d_in]: the golden layout, no transpose
    module = SelfAttention_v2(d_in, d_out)
    module.load_weights(
        [("W_query.weight", _mx(w_query)), ("W_key.weight", _mx(w_key)), ("W_value.weight", _mx(w_value))]
    )
    return module


def _trainable(module):
    trainable = {name for name, _ in tree_flatten(module.trainable_parameters())}
    return [name in trainable for name, _ in tree_flatten(module.parameters())]


def create_parameter(d_in, d_out, seed):
    mx.random.seed(seed)
    module = SelfAttention_v1(d_in, d_out)  # MLX has no Parameter class: a module's arrays are its parameters
    return {"parameter": _np(module.W_query), "trainable": all(_trainable(module))}


def project(x, w):
    return _np(_mx(x) @ _mx(w))


def transposed_matmul(q, k):
    return _np(_mx(q) @ _mx(k).swapaxes(-1, -2))


def scale(scores, d_k):
    return _np(_mx(scores) / d_k**0.5)


def softmax(scores):
    return _np(mx.softmax(_mx(scores), axis=-1))


def blend(weights, v):
    return _np(_mx(weights) @ _mx(v))


def dot_columns(x, w):
    x, w = _mx(x), _mx(w)
    return _np(mx.stack([mx.inner(x, w[:, j]) for j in range(w.shape[1])]))


def attention(x, w_query, w_key, w_value):
    x, W_query, W_key, W_value = _mx(x), _mx(w_query), _mx(w_key), _mx(w_value)
    queries = x @ W_query
    keys = x @ W_key
    values = x @ W_value
    attn_scores = queries @ keys.swapaxes(-1, -2)
    d_k = keys.shape[-1]
    attn_weights = mx.softmax(attn_scores / d_k**0.5, axis=-1)
    context_vec = attn_weights @ values
    outputs = {
        "query": queries,
        "key": keys,
        "value": values,
        "scores": attn_scores,
        "weights": attn_weights,
        "context": context_vec,
    }
    return {name: _np(a) for name, a in outputs.items()} | {"d_k": d_k}


def self_attention_v1(x, w_query, w_key, w_value):
    module = _v1(w_query, w_key, w_value)
    context = module(_mx(x))
    module.freeze()  # the document's requires_grad_(False): values must not change
    return {"context": _np(context), "context_no_grad": _np(module(_mx(x)))}


def self_attention_v2(x, w_query, w_key, w_value):
    return _np(_v2(w_query, w_key, w_value)(_mx(x)))


def exercise_3_1(x, w_query, w_key, w_value):
    sa_v2 = _v2(w_query, w_key, w_value)
    d_out, d_in = np.shape(w_query)
    sa_v1 = SelfAttention_v1(d_in, d_out)
    sa_v1.update({"W_query": sa_v2.W_query.weight.T, "W_key": sa_v2.W_key.weight.T, "W_value": sa_v2.W_value.weight.T})
    return {"context": _np(sa_v1(_mx(x))), "context_v2": _np(sa_v2(_mx(x)))}


def parameters(d_in, d_out, form):
    module = {"v1": SelfAttention_v1, "v2": SelfAttention_v2}[form](d_in, d_out)
    return {"count": sum(a.size for _, a in tree_flatten(module.parameters())), "trainable": _trainable(module)}


def draw(distribution, n, seed):
    key = mx.random.key(seed)
    return _np(
        mx.random.uniform(shape=(n,), key=key) if distribution == "uniform" else mx.random.normal(shape=(n,), key=key)
    )


def initial_weights(d_in, d_out, form, seed):
    mx.random.seed(seed)
    if form == "v1":
        module = SelfAttention_v1(d_in, d_out)
        params = module.W_query, module.W_key, module.W_value
    else:
        module = SelfAttention_v2(d_in, d_out)  # nn.Linear's default init, U(+-1/sqrt(d_in))
        params = module.W_query.weight, module.W_key.weight, module.W_value.weight
    return dict(zip(("w_query", "w_key", "w_value"), map(_np, params)))


def knobs_removed(x):
    x = _mx(x)
    eye = mx.eye(x.shape[-1], dtype=x.dtype)
    part6 = mx.softmax(x @ x.swapaxes(-1, -2), axis=-1) @ x
    part6_scaled = mx.softmax(x @ x.swapaxes(-1, -2) / x.shape[-1] ** 0.5, axis=-1) @ x
    queries, keys, values = x @ eye, x @ eye, x @ eye
    unscaled = mx.softmax(queries @ keys.swapaxes(-1, -2), axis=-1) @ values
    identity = _v1(*(_np(eye),) * 3)
    return {
        "part6": _np(part6),
        "part6_scaled": _np(part6_scaled),
        "part7_identity": _np(identity(x)),
        "part7_identity_unscaled": _np(unscaled),
    }


def _loss(module, x, g):
    return (module(x) * g).sum()


def gradients(x, w_query, w_key, w_value, g, form):
    module = _v1(w_query, w_key, w_value) if form == "v1" else _v2(w_query, w_key, w_value)
    x, g = _mx(x), _mx(g)
    _, grads = nn.value_and_grad(module, _loss)(module, x, g)
    grad_x = mx.grad(lambda x: _loss(module, x, g))(x)
    if form == "v2":  # nn.Linear's gradient is in its own [d_out, d_in] layout: the layout the weights came in
        grads = {name: layer["weight"] for name, layer in grads.items()}
    return {
        "grad_w_query": _np(grads["W_query"]),
        "grad_w_key": _np(grads["W_key"]),
        "grad_w_value": _np(grads["W_value"]),
        "grad_x": _np(grad_x),
    }


def sgd_step(x, w_query, w_key, w_value, g, lr):
    module = _v1(w_query, w_key, w_value)
    optimizer = optim.SGD(learning_rate=lr)
    _, grads = nn.value_and_grad(module, _loss)(module, _mx(x), _mx(g))
    optimizer.update(module, grads)
    return {"w_query": _np(module.W_query), "w_key": _np(module.W_key), "w_value": _np(module.W_value)}
