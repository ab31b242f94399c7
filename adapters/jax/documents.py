"""JAX: the documents' own ops: the mapping table's rows, the whole pipeline, the module forms,
initialisation and the knobs, and training.
"""

import math

import jax
import jax.numpy as jnp

from .shared import _compiled, _np, _scaled_softmax


def _attend(queries, keys, values):
    attn_scores = queries @ jnp.swapaxes(keys, -1, -2)  # (.., T, S); keys.T would reverse every axis of a batch
    return _scaled_softmax(attn_scores, keys) @ values


def self_attention_v1_apply(params, x):
    return _attend(x @ params["W_query"], x @ params["W_key"], x @ params["W_value"])


def self_attention_v2_apply(params, x):
    def dense(p, inputs):
        return inputs @ p["kernel"]

    return _attend(dense(params["W_query"], x), dense(params["W_key"], x), dense(params["W_value"], x))


def _v2_params(w_query, w_key, w_value):
    # Dense kernels are [d_in, d_out]; the golden weights are nn.Linear's [d_out, d_in].
    return {
        name: {"kernel": jnp.asarray(w).T} for name, w in (("W_query", w_query), ("W_key", w_key), ("W_value", w_value))
    }


def _trainable(params, apply, x):
    """JAX has no trainable flag: a leaf is trainable when jax.grad reaches it with a float gradient
    (traced for its dtypes only: jax.eval_shape computes nothing)."""
    grads = jax.eval_shape(jax.grad(lambda p, x: apply(p, x).sum()), params, x)
    return [bool(jnp.issubdtype(g.dtype, jnp.floating)) for g in jax.tree.leaves(grads)]


def create_parameter(d_in, d_out, seed):
    parameter = jax.random.uniform(jax.random.key(seed), (d_in, d_out), dtype=jnp.float32)
    trainable = _trainable({"W": parameter}, lambda p, x: x @ p["W"], jax.ShapeDtypeStruct((1, d_in), jnp.float32))
    return {"parameter": _np(parameter), "trainable": all(trainable)}


@_compiled()
def project(x, w):
    return jnp.asarray(x) @ jnp.asarray(w)


@_compiled()
def transposed_matmul(q, k):
    return jnp.asarray(q) @ jnp.swapaxes(jnp.asarray(k), -1, -2)


@_compiled("d_k")
def scale(scores, d_k):
    return jnp.asarray(scores) / math.sqrt(d_k)


@_compiled()
def softmax(scores):
    return jax.nn.softmax(jnp.asarray(scores), axis=-1)


@_compiled()
def blend(weights, v):
    return jnp.asarray(weights) @ jnp.asarray(v)


@_compiled()
def dot_columns(x, w):
    x, w = jnp.asarray(x), jnp.asarray(w)
    return jnp.stack([jnp.dot(x, w[:, j]) for j in range(w.shape[1])])


@_compiled()
def attention(x, w_query, w_key, w_value):
    x = jnp.asarray(x)
    queries = x @ jnp.asarray(w_query)
    keys = x @ jnp.asarray(w_key)
    values = x @ jnp.asarray(w_value)
    attn_scores = queries @ jnp.swapaxes(keys, -1, -2)
    attn_weights = _scaled_softmax(attn_scores, keys)
    context_vec = attn_weights @ values
    outputs = {
        "query": queries,
        "key": keys,
        "value": values,
        "scores": attn_scores,
        "weights": attn_weights,
        "context": context_vec,
    }
    return outputs | {"d_k": keys.shape[-1]}


@_compiled()
def self_attention_v1(x, w_query, w_key, w_value):
    params = {"W_query": jnp.asarray(w_query), "W_key": jnp.asarray(w_key), "W_value": jnp.asarray(w_value)}
    context = self_attention_v1_apply(params, jnp.asarray(x))
    frozen = self_attention_v1_apply(jax.lax.stop_gradient(params), jnp.asarray(x))
    return {"context": context, "context_no_grad": frozen}


@_compiled()
def self_attention_v2(x, w_query, w_key, w_value):
    return self_attention_v2_apply(_v2_params(w_query, w_key, w_value), jnp.asarray(x))


@_compiled()
def exercise_3_1(x, w_query, w_key, w_value):
    v2 = _v2_params(w_query, w_key, w_value)
    v1 = {name: layer["kernel"] for name, layer in v2.items()}  # kernels are already [d_in, d_out]
    x = jnp.asarray(x)
    return {"context": self_attention_v1_apply(v1, x), "context_v2": self_attention_v2_apply(v2, x)}


def parameters(d_in, d_out, form):
    def init():  # the module's parameters as JAX would draw them, traced for shapes and dtypes only
        draws = [jax.random.uniform(k, (d_in, d_out)) for k in jax.random.split(jax.random.key(0), 3)]
        return dict(zip(("W_query", "W_key", "W_value"), draws)) if form == "v1" else _v2_params(*(w.T for w in draws))

    params = jax.eval_shape(init)  # as flax's init does under eval_shape: a pytree of shapes, nothing computed
    apply = self_attention_v1_apply if form == "v1" else self_attention_v2_apply
    return {
        "count": sum(leaf.size for leaf in jax.tree.leaves(params)),
        "trainable": _trainable(params, apply, jax.ShapeDtypeStruct((1, d_in), jnp.float32)),
    }


@_compiled("distribution", "n")
def draw(distribution, n, seed):
    key = jax.random.key(seed)
    sample = jax.random.uniform if distribution == "uniform" else jax.random.normal
    return sample(key, (n,), dtype=jnp.float32)


@_compiled("d_in", "d_out", "form")
def initial_weights(d_in, d_out, form, seed):
    keys = jax.random.split(jax.random.key(seed), 3)
    if form == "v1":
        params = [jax.random.uniform(k, (d_in, d_out), dtype=jnp.float32) for k in keys]
    else:
        # JAX has no nn.Linear; variance_scaling(1/3, fan_in, uniform) is its init: U(+-1/sqrt(d_in)).
        init = jax.nn.initializers.variance_scaling(1 / 3, "fan_in", "uniform")
        params = [init(k, (d_in, d_out), jnp.float32).T for k in keys]  # kernels, shown as [d_out, d_in]
    return dict(zip(("w_query", "w_key", "w_value"), params))


@_compiled()
def knobs_removed(x):
    x = jnp.asarray(x)
    d = x.shape[-1]
    eye = jnp.eye(d, dtype=x.dtype)

    def attend(q, k, v, scaled):
        scores = q @ jnp.swapaxes(k, -1, -2)
        return jax.nn.softmax(scores / math.sqrt(d) if scaled else scores, axis=-1) @ v

    params = {"W_query": eye, "W_key": eye, "W_value": eye}
    return {
        "part6": attend(x, x, x, False),
        "part6_scaled": attend(x, x, x, True),
        "part7_identity": self_attention_v1_apply(params, x),
        "part7_identity_unscaled": attend(x @ eye, x @ eye, x @ eye, False),
    }


def _loss(apply):
    return lambda params, x, g: jnp.sum(apply(params, x) * g)


@_compiled("form")
def gradients(x, w_query, w_key, w_value, g, form):
    x, g = jnp.asarray(x), jnp.asarray(g)
    if form == "v1":
        params = {"W_query": jnp.asarray(w_query), "W_key": jnp.asarray(w_key), "W_value": jnp.asarray(w_value)}
        grads, grad_x = jax.grad(_loss(self_attention_v1_apply), argnums=(0, 1))(params, x, g)
    else:
        params = _v2_params(w_query, w_key, w_value)
        grads, grad_x = jax.grad(_loss(self_attention_v2_apply), argnums=(0, 1))(params, x, g)
        grads = {name: layer["kernel"].T for name, layer in grads.items()}  # back to nn.Linear's [d_out, d_in]
    return {
        "grad_w_query": grads["W_query"],
        "grad_w_key": grads["W_key"],
        "grad_w_value": grads["W_value"],
        "grad_x": grad_x,
    }


@_compiled()
def sgd_step(x, w_query, w_key, w_value, g, lr):
    params = {"W_query": jnp.asarray(w_query), "W_key": jnp.asarray(w_key), "W_value": jnp.asarray(w_value)}
    grads = jax.grad(_loss(self_attention_v1_apply))(params, jnp.asarray(x), jnp.asarray(g))
    params = jax.tree.map(lambda w, d: w - lr * d, params, grads)  # plain SGD, no optax needed for one step
    return {"w_query": params["W_query"], "w_key": params["W_key"], "w_value": params["W_value"]}
