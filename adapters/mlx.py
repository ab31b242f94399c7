"""MLX (Apple's array framework; `mlx[cpu]` runs it on Linux), written in MLX's own idiom: mx.array,
`@`, `.swapaxes(-1, -2)`, mx.softmax, mlx.nn modules for the module forms, mx.grad and
mlx.optimizers.SGD for training, and the fused mx.fast.scaled_dot_product_attention ([B, N, T, H]).

Added the way an outside adapter is: the template, this file and one tox environment; its known
divergences are data, in spec/divergences/<adapter>.yaml. MLX is lazy: nothing is computed until an array
is read (np.array below), so every function's graph is evaluated once, at its return.
"""

import math

import ml_dtypes
import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
import numpy as np
from mlx.utils import tree_flatten

from attention_conformance import ports

DTYPES = ("float32", "float64", "float16", "bfloat16")
NOT_APPLICABLE = {
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
_DTYPES = {"float64": mx.float64, "float32": mx.float32, "float16": mx.float16, "bfloat16": mx.bfloat16}


def version():
    return f"mlx {mx.__version__}"


def devices():
    return ["cpu"] + ["gpu"] * mx.metal.is_available()


def _mx(a):
    a = np.asarray(a)
    if a.dtype == bool:
        return mx.array(a)
    return mx.array(a, dtype=_DTYPES[a.dtype.name])  # mx.array alone turns float64 into float32


def _np(a):
    if a.dtype == mx.bfloat16:  # NumPy cannot take MLX's bfloat16 buffer; float32 holds it exactly
        return np.array(a.astype(mx.float32)).astype(ml_dtypes.bfloat16)
    return np.array(a)


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


# --- the mapping-table rows -------------------------------------------------


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


# --- the whole pipeline and the module forms ---------------------------------


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


# --- masks, dropout and heads ---------------------------------------------------


def _masked_weights(attn_scores, keys, hidden):
    attn_scores = mx.where(hidden, -mx.inf, attn_scores)  # True = hidden
    return mx.softmax(attn_scores / keys.shape[-1] ** 0.5, axis=-1)


def masked_attention(x, w_query, w_key, w_value, mask):
    x = _mx(x)
    queries, keys, values = x @ _mx(w_query), x @ _mx(w_key), x @ _mx(w_value)
    attn_weights = _masked_weights(queries @ keys.swapaxes(-1, -2), keys, _mx(mask))
    return {"weights": _np(attn_weights), "context": _np(attn_weights @ values)}


def _causal_mask(T_q, T_k):
    # Query i at absolute position T_k - T_q + i may see keys 0..that position: above it is the future.
    return mx.triu(mx.ones((T_q, T_k), dtype=mx.bool_), k=T_k - T_q + 1)


def causal_attention(x, w_query, w_key, w_value):
    T = np.shape(x)[-2]
    return masked_attention(x, w_query, w_key, w_value, _np(_causal_mask(T, T)))


def _split_heads(t, n):  # (.., T, n*H) -> (.., n, T, H): one (T, H) block per head
    return t.reshape(*t.shape[:-1], n, -1).swapaxes(-3, -2)


def _heads(t, n):  # (.., T, n*H) -> (B, n, T, H): the fused kernel's layout, rank 4 only
    t = _split_heads(t, n)
    return t if t.ndim == 4 else t[None]


def _sdpa(queries, keys, values, mask, unbatched):
    out = mx.fast.scaled_dot_product_attention(queries, keys, values, scale=queries.shape[-1] ** -0.5, mask=mask)
    return out[0] if unbatched else out


def mask_conventions(x, w_query, w_key, w_value, mask, api, fill):
    x, hidden = _mx(x), _mx(mask)
    queries, keys, values = (_heads(x @ _mx(w), 1) for w in (w_query, w_key, w_value))
    if api == "bool":  # its boolean mask: True = the key takes part, the suite's opposite
        attn_mask = ~hidden
    else:  # an additive mask in the inputs' dtype
        value = {"neg_inf": -math.inf, "large_negative": -1e9, "dtype_min": float(mx.finfo(x.dtype).min)}[fill]
        attn_mask = mx.where(hidden, mx.array(value, dtype=x.dtype), mx.array(0, dtype=x.dtype))
    attn_mask = attn_mask[:, None] if attn_mask.ndim == 3 else attn_mask  # [B, 1, T, S]: every head
    return _np(_sdpa(queries, keys, values, attn_mask, x.ndim == 2)[..., 0, :, :])


# --- decoding: queries start..T-1 over a cache of keys 0..T-1 -----------------------------------


def decode_attention(x, w_query, w_key, w_value, start):
    x, W_query, W_key, W_value = _mx(x), _mx(w_query), _mx(w_key), _mx(w_value)
    keys, values = x @ W_key, x @ W_value
    queries = x[..., start:, :] @ W_query
    context = (
        _masked_weights(queries @ keys.swapaxes(-1, -2), keys, _causal_mask(queries.shape[-2], keys.shape[-2])) @ values
    )
    # Token by token: the cache holds keys and values 0..p-1 and grows by the new token's; its query
    # attends over the whole cache, unmasked, since the future is not there yet.
    k_cache, v_cache, steps = keys[..., :start, :], values[..., :start, :], []
    for p in range(start, x.shape[-2]):
        token = x[..., p : p + 1, :]
        k_cache = mx.concatenate([k_cache, token @ W_key], axis=-2)
        v_cache = mx.concatenate([v_cache, token @ W_value], axis=-2)
        weights = mx.softmax((token @ W_query) @ k_cache.swapaxes(-1, -2) / k_cache.shape[-1] ** 0.5, axis=-1)
        steps.append(weights @ v_cache)
    return {"context": _np(context), "stepwise": _np(mx.concatenate(steps, axis=-2))}


def causal_flag(x, w_query, w_key, w_value, start):
    x = _mx(x)
    queries = _heads(x[..., start:, :] @ _mx(w_query), 1)
    keys, values = _heads(x @ _mx(w_key), 1), _heads(x @ _mx(w_value), 1)
    return _np(_sdpa(queries, keys, values, "causal", x.ndim == 2)[..., 0, :, :])


def dropout(weights, p, seed):
    layer, weights = nn.Dropout(p), _mx(weights)
    evaluated = layer.eval()(weights)
    mx.random.seed(seed)
    return {"dropout_eval": _np(evaluated), "dropout_train": _np(layer.train()(weights))}


def multi_head_attention(x, w_query, w_key, w_value, w_out, num_heads, causal):
    x = _mx(x)
    d_out = np.shape(w_query)[1]
    head_dim = d_out // num_heads
    queries, keys, values = (_split_heads(x @ _mx(w), num_heads) for w in (w_query, w_key, w_value))
    attn_scores = queries @ keys.swapaxes(-1, -2)
    T = x.shape[-2]
    attn_weights = (
        _masked_weights(attn_scores, keys, _causal_mask(T, T))
        if causal
        else mx.softmax(attn_scores / head_dim**0.5, axis=-1)
    )
    heads = attn_weights @ values  # (.., N, T, H)
    merged = heads.swapaxes(-3, -2).reshape(*x.shape[:-1], d_out)
    return {"heads": _np(heads), "context": _np(merged @ _mx(w_out))}


def fused_attention(x, w_query, w_key, w_value, num_heads, causal):
    x = _mx(x)
    queries, keys, values = (_heads(x @ _mx(w), num_heads) for w in (w_query, w_key, w_value))
    return _np(_sdpa(queries, keys, values, "causal" if causal else None, x.ndim == 2))


def grouped_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    x = _mx(x)
    queries = _heads(x @ _mx(w_query), num_heads)
    group = num_heads // num_kv_heads
    keys, values = (mx.repeat(_heads(x @ _mx(w), num_kv_heads), group, axis=-3) for w in (w_key, w_value))  # in place
    attn_scores = queries @ keys.swapaxes(-1, -2)
    T = x.shape[-2]
    weights = (
        _masked_weights(attn_scores, keys, _causal_mask(T, T))
        if causal
        else mx.softmax(attn_scores / keys.shape[-1] ** 0.5, axis=-1)
    )
    heads = weights @ values
    return _np(heads[0] if x.ndim == 2 else heads)


def grouped_fused_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    x = _mx(x)
    queries = _heads(x @ _mx(w_query), num_heads)
    keys, values = (
        _heads(x @ _mx(w_key), num_kv_heads),
        _heads(x @ _mx(w_value), num_kv_heads),
    )  # not tiled: the kernel groups
    return _np(_sdpa(queries, keys, values, "causal" if causal else None, x.ndim == 2))


def attention_layer(x, w_query, w_key, w_value):
    raise NotImplementedError(NOT_APPLICABLE["attention_layer"])


# --- what the documents say about initialisation and the knobs ---------------------


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


# --- the layers checkpoints are loaded into (attention_conformance.ports: every layout) -------
# mlx.nn.MultiHeadAttention holds four nn.Linear: query_proj, key_proj, value_proj, out_proj, each
# weight [out, in] (torch's nn.Linear layout). It is torch's nn.MultiheadAttention state with the
# packed in_proj split in three, so a checkpoint goes through ports' torch layout.

_PROJ = ("query_proj", "key_proj", "value_proj")


def _mlx_state(torch_state):
    """torch nn.MultiheadAttention's state_dict -> mlx.nn.MultiHeadAttention's parameter names."""
    weights = np.split(torch_state["in_proj_weight"], 3)  # [3E, E] -> q, k, v, in that order
    biases = np.split(torch_state["in_proj_bias"], 3)
    state = {f"{p}.weight": w for p, w in zip(_PROJ, weights)} | {f"{p}.bias": b for p, b in zip(_PROJ, biases)}
    return state | {"out_proj.weight": torch_state["out_proj.weight"], "out_proj.bias": torch_state["out_proj.bias"]}


def _torch_state(mlx_state):
    return {
        "in_proj_weight": np.concatenate([mlx_state[f"{p}.weight"] for p in _PROJ]),
        "in_proj_bias": np.concatenate([mlx_state[f"{p}.bias"] for p in _PROJ]),
        "out_proj.weight": mlx_state["out_proj.weight"],
        "out_proj.bias": mlx_state["out_proj.bias"],
    }


def _mha(weights, num_heads, checkpoint):
    """mlx.nn.MultiHeadAttention with bias=True (its default is False: a checkpoint with biases needs it)."""
    state = _mlx_state(ports.as_saved_by(checkpoint, weights, "torch", num_heads))
    layer = nn.MultiHeadAttention(state["out_proj.weight"].shape[0], num_heads, bias=True)
    layer.load_weights([(name, _mx(value)) for name, value in state.items()])  # strict: every name and shape
    return layer


def _weights_of(layer, x, mask):
    """The layer returns no attention weights; these are its own projections' (the layer's
    query_proj and key_proj, its scale, the mask it was given), as an MLX user inspects them."""
    queries = _heads(layer.query_proj(x), layer.num_heads)
    keys = _heads(layer.key_proj(x), layer.num_heads)
    attn_scores = queries @ keys.swapaxes(-1, -2) * queries.shape[-1] ** -0.5
    if mask is not None:
        attn_scores = mx.where(mask, -mx.inf, attn_scores)
    return mx.softmax(attn_scores, axis=-1)


def _gpt2_attention(x, state, num_heads, causal):
    """GPT-2's attention block: one packed c_attn projection (Conv1D, input-major: x @ W + b) split into q, k, v."""
    c_attn_w, c_attn_b, c_proj_w, c_proj_b = (
        _mx(state[k]) for k in ("c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias")
    )
    E, T = x.shape[-1], x.shape[-2]
    queries, keys, values = (_heads(t, num_heads) for t in mx.split(x @ c_attn_w + c_attn_b, 3, axis=-1))
    attn_scores = queries @ keys.swapaxes(-1, -2)
    head_dim = E // num_heads
    attn_weights = (
        _masked_weights(attn_scores, keys, _causal_mask(T, T))
        if causal
        else mx.softmax(attn_scores / head_dim**0.5, axis=-1)
    )
    merged = (attn_weights @ values).swapaxes(-3, -2).reshape(x.shape)
    held = {"c_attn.weight": c_attn_w, "c_attn.bias": c_attn_b, "c_proj.weight": c_proj_w, "c_proj.bias": c_proj_b}
    return merged @ c_proj_w + c_proj_b, attn_weights, held


def attention_module(
    x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, causal, layer, checkpoint
):
    weights = ports.reference_weights(w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    x = _mx(x)
    if layer == "gpt2":
        context, attn_weights, held = _gpt2_attention(
            x, ports.as_saved_by(checkpoint, weights, "gpt2", num_heads), num_heads, causal
        )
        saved = ports.from_layout("gpt2", {k: _np(v) for k, v in held.items()}, num_heads)
    elif layer == "mha":
        mha = _mha(weights, num_heads, checkpoint)
        T = x.shape[-2]
        context = mha(x, x, x, mask="causal" if causal else None)  # the string mask: bottom-right causal
        attn_weights = _weights_of(mha, x, _causal_mask(T, T) if causal else None)
        saved = ports.from_layout(
            "torch", _torch_state({k: _np(v) for k, v in tree_flatten(mha.parameters())}), num_heads
        )
    else:
        raise NotImplementedError(NOT_APPLICABLE[f"layer_{layer}"])
    return {"context": _np(context), "weights": _np(attn_weights), "round_trip": ports.flat(saved)}


def layer_mask(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, mask):
    weights = ports.reference_weights(w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    mha, x = _mha(weights, num_heads, "reference"), _mx(x)
    return _np(mha(x, x, x, mask=~_mx(mask)[:, None]))  # a boolean mask, True = attend, [B, 1, T, S] for every head


def layer_defaults(d_in, num_heads, seed):
    mx.random.seed(seed)
    layer = nn.MultiHeadAttention(d_in, num_heads)
    state = {k: _np(v) for k, v in tree_flatten(layer.parameters())}
    # No bias by default, no dropout argument at all, and no attention weights returned (so none averaged).
    return {
        "bias": "out_proj.bias" in state,
        "dropout": 0.0,
        "averaged_weights": False,
        "w_query": state["query_proj.weight"].T,
    }


# --- training ------------------------------------------------------------------


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
