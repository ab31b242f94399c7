"""PyTorch: the documents' own ops: the mapping table's rows, the whole pipeline, the module forms,
initialisation and the knobs, and training.
"""

import torch
from torch import nn

from .shared import _np, _t


class SelfAttention_v1(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x):
        queries = x @ self.W_query  # (.., T, H)
        keys = x @ self.W_key  # (.., S, H)
        values = x @ self.W_value  # (.., S, H)
        attn_scores = queries @ keys.mT  # (.., T, S); the document's keys.T reverses every axis of a batch
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        return attn_weights @ values


class SelfAttention_v2(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        attn_scores = queries @ keys.mT
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        return attn_weights @ values


def _v1(w_query, w_key, w_value):
    d_in, d_out = w_query.shape
    module = SelfAttention_v1(d_in, d_out).to(_t(w_query).dtype)
    module.load_state_dict({"W_query": _t(w_query), "W_key": _t(w_key), "W_value": _t(w_value)})
    return module


def _v2(w_query, w_key, w_value):
    d_out, d_in = w_query.shape  # nn.Linear stores [d_out, d_in]: the golden layout, no transpose
    module = SelfAttention_v2(d_in, d_out).to(_t(w_query).dtype)
    module.load_state_dict({"W_query.weight": _t(w_query), "W_key.weight": _t(w_key), "W_value.weight": _t(w_value)})
    return module


def create_parameter(d_in, d_out, seed):
    torch.manual_seed(seed)
    parameter = nn.Parameter(torch.rand(d_in, d_out))
    return {"parameter": _np(parameter), "trainable": parameter.requires_grad}


def project(x, w):
    return _np(_t(x) @ _t(w))


def transposed_matmul(q, k):
    return _np(_t(q) @ _t(k).mT)


def scale(scores, d_k):
    return _np(_t(scores) / d_k**0.5)


def softmax(scores):
    return _np(torch.softmax(_t(scores), dim=-1))


def blend(weights, v):
    return _np(_t(weights) @ _t(v))


def dot_columns(x, w):
    x, w = _t(x), _t(w)
    return _np(torch.stack([torch.dot(x, w[:, j]) for j in range(w.shape[1])]))


def attention(x, w_query, w_key, w_value):
    x, W_query, W_key, W_value = _t(x), _t(w_query), _t(w_key), _t(w_value)
    queries = x @ W_query
    keys = x @ W_key
    values = x @ W_value
    attn_scores = queries @ keys.mT
    d_k = keys.shape[-1]
    attn_weights = torch.softmax(attn_scores / d_k**0.5, dim=-1)
    context_vec = attn_weights @ values
    outputs = {
        "query": queries,
        "key": keys,
        "value": values,
        "scores": attn_scores,
        "weights": attn_weights,
        "context": context_vec,
    }
    return {name: _np(t) for name, t in outputs.items()} | {"d_k": d_k}


def self_attention_v1(x, w_query, w_key, w_value):
    module = _v1(w_query, w_key, w_value)
    context = module(_t(x))
    module.requires_grad_(False)  # the document's print trick: values must not change
    return {"context": _np(context), "context_no_grad": _np(module(_t(x)))}


def self_attention_v2(x, w_query, w_key, w_value):
    return _np(_v2(w_query, w_key, w_value)(_t(x)))


def exercise_3_1(x, w_query, w_key, w_value):
    sa_v2 = _v2(w_query, w_key, w_value)
    d_out, d_in = w_query.shape
    sa_v1 = SelfAttention_v1(d_in, d_out).to(sa_v2.W_query.weight.dtype)
    sa_v1.W_query.data = sa_v2.W_query.weight.T.clone()
    sa_v1.W_key.data = sa_v2.W_key.weight.T.clone()
    sa_v1.W_value.data = sa_v2.W_value.weight.T.clone()
    return {"context": _np(sa_v1(_t(x))), "context_v2": _np(sa_v2(_t(x)))}


def parameters(d_in, d_out, form):
    module = {"v1": SelfAttention_v1, "v2": SelfAttention_v2}[form](d_in, d_out)
    return {
        "count": sum(p.numel() for p in module.parameters()),
        "trainable": [p.requires_grad for p in module.parameters()],
    }


def draw(distribution, n, seed):
    torch.manual_seed(seed)
    return _np(torch.rand(n) if distribution == "uniform" else torch.randn(n))


def initial_weights(d_in, d_out, form, seed):
    torch.manual_seed(seed)
    if form == "v1":
        module = SelfAttention_v1(d_in, d_out)
        params = module.W_query, module.W_key, module.W_value
    else:
        module = SelfAttention_v2(d_in, d_out)  # nn.Linear's default init
        params = module.W_query.weight, module.W_key.weight, module.W_value.weight
    return dict(zip(("w_query", "w_key", "w_value"), map(_np, params)))


def knobs_removed(x):
    x = _t(x)
    eye = torch.eye(x.shape[-1])
    part6 = torch.softmax(x @ x.mT, dim=-1) @ x
    part6_scaled = torch.softmax(x @ x.mT / x.shape[-1] ** 0.5, dim=-1) @ x
    queries, keys, values = x @ eye, x @ eye, x @ eye
    unscaled = torch.softmax(queries @ keys.mT, dim=-1) @ values
    return {
        "part6": _np(part6),
        "part6_scaled": _np(part6_scaled),
        "part7_identity": _np(_v1(_np(eye), _np(eye), _np(eye))(x)),
        "part7_identity_unscaled": _np(unscaled),
    }


def gradients(x, w_query, w_key, w_value, g, form):
    module = _v1(w_query, w_key, w_value) if form == "v1" else _v2(w_query, w_key, w_value)
    x = _t(x).requires_grad_()
    loss = (module(x) * _t(g)).sum()
    loss.backward()
    # nn.Linear's gradient lands in its own [d_out, d_in] layout: the layout the weights came in.
    params = [module.W_query, module.W_key, module.W_value]
    if form == "v2":
        params = [layer.weight for layer in params]
    return {
        "grad_w_query": _np(params[0].grad),
        "grad_w_key": _np(params[1].grad),
        "grad_w_value": _np(params[2].grad),
        "grad_x": _np(x.grad),
    }


def sgd_step(x, w_query, w_key, w_value, g, lr):
    module = _v1(w_query, w_key, w_value)
    optimizer = torch.optim.SGD(module.parameters(), lr=lr)
    optimizer.zero_grad()
    (module(_t(x)) * _t(g)).sum().backward()
    optimizer.step()
    return {"w_query": _np(module.W_query), "w_key": _np(module.W_key), "w_value": _np(module.W_value)}
