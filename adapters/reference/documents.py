"""The documents' attention: the mapping-table rows, the whole pipeline, the module forms, initialisation, the
knobs removed, and training (gradients by hand, an SGD step)."""

import numpy as np

from attention_conformance import bounds
from attention_conformance.remembered import remembered

from .shared import _bounded, _f64, _remembering, exp, fsum, mm


def create_parameter(d_in, d_out, seed):
    # The conforming draw for `nn.Parameter(torch.rand(d_in, d_out))`: uniform on [0, 1).
    value = np.random.default_rng(seed).random((d_in, d_out))
    return {"parameter": value, "trainable": True}


@remembered(_remembering, bounds.overflows)
def project(x, w):
    x, w = _f64(x, w)
    return mm(x, w)  # (.., T, D) @ (D, H) -> (.., T, H)


def transposed_matmul(q, k):
    q, k = _f64(q, k)
    return mm(q, np.swapaxes(k, -1, -2))  # (.., T, H) @ (.., H, S) -> (.., T, S)


def scale(scores, d_k):
    (scores,) = _f64(scores)
    return scores / np.sqrt(d_k)


def softmax(scores):
    (scores,) = _f64(scores)
    if _bounded(scores):
        return bounds.softmax(scores)
    shifted = scores - scores.max(axis=-1, keepdims=True)  # exp never overflows
    e = exp(shifted)
    return e / fsum(e, axis=-1, keepdims=True)  # normalise over keys, the last axis


def blend(weights, v):
    weights, v = _f64(weights, v)
    return mm(weights, v)  # (.., T, S) @ (.., S, H) -> (.., T, H)


def dot_columns(x, w):
    x, w = _f64(x, w)
    return np.array([mm(x, w[:, j]) for j in range(w.shape[1])])


def attention(x, w_query, w_key, w_value):
    queries = project(x, w_query)  # (.., T, H)
    keys = project(x, w_key)  # (.., S, H)
    values = project(x, w_value)  # (.., S, H)
    attn_scores = transposed_matmul(queries, keys)  # (.., T, S)
    d_k = keys.shape[-1]
    attn_weights = softmax(scale(attn_scores, d_k))  # (.., T, S), rows sum to 1
    context_vec = blend(attn_weights, values)  # (.., T, H)
    return {
        "query": queries,
        "key": keys,
        "value": values,
        "scores": attn_scores,
        "d_k": d_k,
        "weights": attn_weights,
        "context": context_vec,
    }


def draw(distribution, n, seed):
    rng = np.random.default_rng(seed)
    return rng.random(n) if distribution == "uniform" else rng.standard_normal(n)


def initial_weights(d_in, d_out, form, seed):
    """Three independent draws: v1 like torch.rand, v2 like nn.Linear's U(-1/sqrt(d_in), 1/sqrt(d_in))."""
    rng = np.random.default_rng(seed)
    bound = 1 / np.sqrt(d_in)
    w = [rng.random((d_in, d_out)) if form == "v1" else rng.uniform(-bound, bound, (d_out, d_in)) for _ in range(3)]
    return {"w_query": w[0], "w_key": w[1], "w_value": w[2]}


def knobs_removed(x):
    """Part 6 (softmax(x x^T) x), with and without the scale, against part 7 with W = I."""
    (x,) = _f64(x)
    eye = np.eye(x.shape[-1])
    part6 = blend(softmax(transposed_matmul(x, x)), x)
    part6_scaled = blend(softmax(scale(transposed_matmul(x, x), x.shape[-1])), x)
    q = k = v = project(x, eye)
    unscaled = blend(softmax(transposed_matmul(q, k)), v)
    return {
        "part6": part6,
        "part6_scaled": part6_scaled,
        "part7_identity": attention(x, eye, eye, eye)["context"],
        "part7_identity_unscaled": unscaled,
    }


def self_attention_v1(x, w_query, w_key, w_value):
    context = attention(x, w_query, w_key, w_value)["context"]
    return {"context": context, "context_no_grad": context}


def self_attention_v2(x, w_query, w_key, w_value):
    w_query, w_key, w_value = (np.swapaxes(w, -1, -2) for w in _f64(w_query, w_key, w_value))
    return attention(x, w_query, w_key, w_value)["context"]


def exercise_3_1(x, w_query, w_key, w_value):
    transposed = (np.swapaxes(w, -1, -2) for w in _f64(w_query, w_key, w_value))
    return {
        "context": self_attention_v1(x, *transposed)["context"],
        "context_v2": self_attention_v2(x, w_query, w_key, w_value),
    }


def parameters(d_in, d_out, form):
    return {"count": 3 * d_in * d_out, "trainable": [True, True, True]}


def _backward(x, w_query, w_key, w_value, g):
    """dL/dW_query, dL/dW_key, dL/dW_value, dL/dx, written after the chain rule."""
    x, w_query, w_key, w_value, g = _f64(x, w_query, w_key, w_value, g)
    out = attention(x, w_query, w_key, w_value)
    queries, keys, values, attn_weights = out["query"], out["key"], out["value"], out["weights"]
    d_context = g  # (.., T, H)
    d_weights = mm(d_context, np.swapaxes(values, -1, -2))  # (.., T, S)
    d_values = mm(np.swapaxes(attn_weights, -1, -2), d_context)  # (.., S, H)
    # softmax backward, row by row: dz = a * (da - sum(da * a))
    d_scaled = attn_weights * (d_weights - fsum(d_weights * attn_weights, axis=-1, keepdims=True))
    d_scores = d_scaled / np.sqrt(keys.shape[-1])
    d_queries = mm(d_scores, keys)  # (.., T, H)
    d_keys = mm(np.swapaxes(d_scores, -1, -2), queries)  # (.., S, H)

    def d_weight(d_proj):  # x^T @ d_proj, summed over every leading (batch, token) axis: (D, H)
        return mm(x.reshape(-1, x.shape[-1]).T, d_proj.reshape(-1, d_proj.shape[-1]))

    d_x = mm(d_queries, w_query.T) + mm(d_keys, w_key.T) + mm(d_values, w_value.T)  # (.., T, D)
    return d_weight(d_queries), d_weight(d_keys), d_weight(d_values), d_x


def gradients(x, w_query, w_key, w_value, g, form):
    if form == "v2":  # nn.Linear layout in, gradients back in the same layout
        w_query, w_key, w_value = (np.swapaxes(w, -1, -2) for w in _f64(w_query, w_key, w_value))
    d_wq, d_wk, d_wv, d_x = _backward(x, w_query, w_key, w_value, g)
    if form == "v2":
        d_wq, d_wk, d_wv = d_wq.T, d_wk.T, d_wv.T
    return {"grad_w_query": d_wq, "grad_w_key": d_wk, "grad_w_value": d_wv, "grad_x": d_x}


def sgd_step(x, w_query, w_key, w_value, g, lr):
    d_wq, d_wk, d_wv, _ = _backward(x, w_query, w_key, w_value, g)
    w_query, w_key, w_value = _f64(w_query, w_key, w_value)
    return {"w_query": w_query - lr * d_wq, "w_key": w_key - lr * d_wk, "w_value": w_value - lr * d_wv}
