"""PyTorch, written the way the PyTorch document writes it (SelfAttention_v1 and _v2)."""

import inspect

import ml_dtypes
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attention_conformance import ports

DTYPES = ("float32", "float64", "float16", "bfloat16")
NOT_APPLICABLE = {
    "attention_layer": "keras.layers.Attention's case; nn.MultiheadAttention owns its projections",
    "grouped_attention_layer": (
        "torch.nn has no grouped-query attention layer (nn.MultiheadAttention has one K/V head per query head); "
        "grouped heads run through F.scaled_dot_product_attention(enable_gqa=True)"
    ),
}


def version():
    return f"torch {torch.__version__}"


def pin_numerics():
    # On an AMX CPU, "medium" runs float32 matmuls of size >= 32 in bfloat16 (relative error ~2e-3, far
    # beyond float32's tolerance); TF32 only matters on a GPU, whose float32 must be a CPU's.
    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return {
        "torch.float32_matmul_precision": torch.get_float32_matmul_precision(),
        "torch.cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "torch.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        # Not switches set here, but what picks torch's CPU kernels: recorded beside them.
        "torch.cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch.num_threads": torch.get_num_threads(),
    }


def devices():
    return ["cpu"] + ["gpu"] * torch.cuda.is_available()


def _t(a):
    a = np.array(a)  # a copy: torch never aliases the caller's data
    if a.dtype == ml_dtypes.bfloat16:  # NumPy has no bfloat16 of its own; same bits, torch's dtype
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _np(t):
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


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


# --- the mapping-table rows -------------------------------------------------


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


# --- the whole pipeline and the module forms ---------------------------------


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


# --- masks, dropout and heads ---------------------------------------------------


def masked_attention(x, w_query, w_key, w_value, mask):
    x = _t(x)
    queries, keys, values = x @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    attn_scores = (queries @ keys.mT).masked_fill(_t(mask), -torch.inf)  # True = hidden
    attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
    return {"weights": _np(attn_weights), "context": _np(attn_weights @ values)}


def _fill(fill, dtype):
    return {"neg_inf": -torch.inf, "large_negative": -1e9, "dtype_min": torch.finfo(dtype).min}[fill]


def mask_conventions(x, w_query, w_key, w_value, mask, api, fill):
    x, hidden = _t(x), _t(mask)
    queries, keys, values = x @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    if api == "bool":  # SDPA's boolean attn_mask: True = the key takes part, the suite's opposite
        attn_mask = ~hidden
    else:  # a float mask added to the scores
        attn_mask = torch.zeros(hidden.shape, dtype=x.dtype).masked_fill(hidden, _fill(fill, x.dtype))
    return _np(F.scaled_dot_product_attention(queries, keys, values, attn_mask=attn_mask))


def _causal_mask(T):
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # above the diagonal: the future


def causal_attention(x, w_query, w_key, w_value):
    return masked_attention(x, w_query, w_key, w_value, _np(_causal_mask(x.shape[-2])))


# --- decoding: queries start..T-1 over a cache of keys 0..T-1 -----------------------------------


def _offset_causal_mask(T_q, T_k):
    # The query at absolute position p = T_k - T_q + i may see keys 0..p: the diagonal moves right.
    return torch.triu(torch.ones(T_q, T_k, dtype=torch.bool), diagonal=T_k - T_q + 1)


def decode_attention(x, w_query, w_key, w_value, start):
    x = _t(x)
    keys, values = x @ _t(w_key), x @ _t(w_value)
    queries = x[..., start:, :] @ _t(w_query)
    attn_scores = (queries @ keys.mT).masked_fill(_offset_causal_mask(queries.shape[-2], keys.shape[-2]), -torch.inf)
    context = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1) @ values
    # Token by token: the cache holds keys and values 0..p-1, the new token's are appended, and its
    # query attends over the whole cache: no mask, the future is not there yet.
    k_cache, v_cache, steps = keys[..., :start, :], values[..., :start, :], []
    for p in range(start, x.shape[-2]):
        token = x[..., p : p + 1, :]
        k_cache, v_cache = (
            torch.cat([k_cache, token @ _t(w_key)], dim=-2),
            torch.cat([v_cache, token @ _t(w_value)], dim=-2),
        )
        weights = torch.softmax((token @ _t(w_query)) @ k_cache.mT / k_cache.shape[-1] ** 0.5, dim=-1)
        steps.append(weights @ v_cache)
    return {"context": _np(context), "stepwise": _np(torch.cat(steps, dim=-2))}


def causal_flag(x, w_query, w_key, w_value, start):
    x = _t(x)
    queries, keys, values = x[..., start:, :] @ _t(w_query), x @ _t(w_key), x @ _t(w_value)
    return _np(F.scaled_dot_product_attention(queries, keys, values, is_causal=True))


def dropout(weights, p, seed):
    layer, weights = nn.Dropout(p), _t(weights)
    evaluated = layer.eval()(weights)
    torch.manual_seed(seed)
    return {"dropout_eval": _np(evaluated), "dropout_train": _np(layer.train()(weights))}


def _split_heads(
    t, n, head_dim
):  # (.., T, n*H) -> (.., n, T, H): one (T, H) block per head, as SDPA takes them; a view, no copy
    return t.view(*t.shape[:-1], n, head_dim).transpose(-3, -2)


def multi_head_attention(x, w_query, w_key, w_value, w_out, num_heads, causal):
    x = _t(x)
    d_out = w_query.shape[1]
    head_dim = d_out // num_heads
    queries, keys, values = (_split_heads(x @ _t(w), num_heads, head_dim) for w in (w_query, w_key, w_value))
    attn_scores = queries @ keys.mT  # (.., N, T, T)
    if causal:
        attn_scores.masked_fill_(
            _causal_mask(x.shape[-2]), -torch.inf
        )  # in place, as the book's MultiHeadAttention does
    # Scaled in place too: at GPT-2's shape each (N, T, T) copy in float64 is 96 MiB.
    attn_weights = torch.softmax(attn_scores.div_(head_dim**0.5), dim=-1)
    heads = attn_weights @ values  # (.., N, T, H)
    merged = heads.transpose(-3, -2).reshape(*x.shape[:-1], d_out)  # (.., T, N*H)
    return {"heads": _np(heads), "context": _np(merged @ _t(w_out))}


# --- what the documents say about initialisation and the knobs ---------------------


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


def fused_attention(x, w_query, w_key, w_value, num_heads, causal):
    x = _t(x)
    head_dim = w_query.shape[1] // num_heads
    queries, keys, values = (_split_heads(x @ _t(w), num_heads, head_dim) for w in (w_query, w_key, w_value))
    return _np(F.scaled_dot_product_attention(queries, keys, values, is_causal=causal))


def _grouped_split(x, w_query, w_key, w_value, num_heads, num_kv_heads):
    head_dim = w_query.shape[1] // num_heads
    return tuple(
        _split_heads(x @ _t(w), n, head_dim)
        for w, n in ((w_query, num_heads), (w_key, num_kv_heads), (w_value, num_kv_heads))
    )


def grouped_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    x = _t(x)
    queries, keys, values = _grouped_split(x, w_query, w_key, w_value, num_heads, num_kv_heads)
    group = num_heads // num_kv_heads
    keys, values = keys.repeat_interleave(group, dim=-3), values.repeat_interleave(group, dim=-3)  # Llama's repeat_kv
    attn_scores = queries @ keys.mT
    if causal:
        attn_scores.masked_fill_(_causal_mask(x.shape[-2]), -torch.inf)
    return _np(torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1) @ values)


def grouped_fused_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    queries, keys, values = _grouped_split(_t(x), w_query, w_key, w_value, num_heads, num_kv_heads)
    return _np(F.scaled_dot_product_attention(queries, keys, values, is_causal=causal, enable_gqa=True))


def attention_layer(x, w_query, w_key, w_value):
    raise NotImplementedError(NOT_APPLICABLE["attention_layer"])


# --- the layers checkpoints are loaded into (attention_conformance.ports: every layout) -------


def _mha(state, num_heads, batch_first, dtype):
    """nn.MultiheadAttention with a torch-layout state_dict; its defaults (bias=True, dropout=0.0)
    are what a checkpoint of it holds."""
    E = state["out_proj.weight"].shape[0]
    layer = nn.MultiheadAttention(E, num_heads, batch_first=batch_first, dtype=dtype)
    layer.load_state_dict({k: _t(v) for k, v in state.items()})
    return layer.eval()


def _conv1d(h, weight, bias):  # GPT-2's Conv1D: an input-major [in, out] weight, x @ W + b
    return torch.addmm(bias, h.reshape(-1, h.shape[-1]), weight).view(*h.shape[:-1], weight.shape[-1])


def _gpt2_attention(x, state, num_heads, causal):
    """GPT-2's attention block: one packed c_attn projection split into q, k, v, then c_proj."""
    c_attn_w, c_attn_b, c_proj_w, c_proj_b = (
        _t(state[k]) for k in ("c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias")
    )
    E = x.shape[-1]
    head_dim = E // num_heads
    queries, keys, values = (
        _split_heads(t, num_heads, head_dim) for t in _conv1d(x, c_attn_w, c_attn_b).split(E, dim=-1)
    )
    attn_scores = queries @ keys.mT
    if causal:
        attn_scores.masked_fill_(_causal_mask(x.shape[-2]), -torch.inf)
    attn_weights = torch.softmax(attn_scores.div_(head_dim**0.5), dim=-1)
    merged = (attn_weights @ values).transpose(-3, -2).reshape(x.shape)
    held = {"c_attn.weight": c_attn_w, "c_attn.bias": c_attn_b, "c_proj.weight": c_proj_w, "c_proj.bias": c_proj_b}
    return _conv1d(merged, c_proj_w, c_proj_b), attn_weights, held


def _layer_outputs(x, state, num_heads, causal, layer):
    """Run `layer` holding `state` (GPT-2's layout for "gpt2", torch's otherwise) on x."""
    x = _t(x)
    if layer == "gpt2":
        context, attn_weights, held = _gpt2_attention(x, state, num_heads, causal)
    else:
        batch_first = layer != "mha_seq_first"  # (T, B, E) is nn.MultiheadAttention's default
        mha = _mha(state, num_heads, batch_first, x.dtype)
        tokens = x if batch_first else x.transpose(0, 1)
        with torch.no_grad():
            context, attn_weights = mha(
                tokens,
                tokens,
                tokens,
                attn_mask=_causal_mask(x.shape[-2]) if causal else None,
                need_weights=True,
                average_attn_weights=layer == "mha_averaged",
            )
        context, held = context if batch_first else context.transpose(0, 1), mha.state_dict()
    saved = {k: _np(v) for k, v in held.items()}
    return {
        "context": _np(context),
        "weights": _np(attn_weights),
        "round_trip": ports.flat(ports.from_layout(ports.layer_layout(layer, "torch"), saved, num_heads)),
    }


def attention_module(
    x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, causal, layer, checkpoint
):
    weights = (w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    return _layer_outputs(
        x, ports.layer_state(checkpoint, layer, "torch", num_heads, *weights), num_heads, causal, layer
    )


def layer_mask(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, mask):
    weights = ports.reference_weights(w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    mha = _mha(ports.to_layout("torch", weights, num_heads), num_heads, True, _t(x).dtype)
    x = _t(x)
    # attn_mask: True = not allowed to attend (the suite's polarity), [B * N, T, S] for a mask per sentence
    attn_mask = _t(mask).repeat_interleave(num_heads, dim=0)
    with torch.no_grad():
        context, _ = mha(x, x, x, attn_mask=attn_mask, need_weights=False)
    return _np(context)


def layer_key_padding(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, padding, causal):
    weights = ports.reference_weights(w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    mha = _mha(ports.to_layout("torch", weights, num_heads), num_heads, True, _t(x).dtype)
    x = _t(x)
    # key_padding_mask [B, S]: True = ignore that key (the suite's polarity); the causal part is an
    # attn_mask [T, S] (is_causal is only a hint that the attn_mask given is causal)
    with torch.no_grad():
        context, _ = mha(
            x,
            x,
            x,
            key_padding_mask=_t(padding),
            need_weights=False,
            attn_mask=_causal_mask(x.shape[-2]) if causal else None,
        )
    return _np(context)


def layer_defaults(d_in, num_heads, seed):
    torch.manual_seed(seed)
    layer = nn.MultiheadAttention(d_in, num_heads)
    averaged = inspect.signature(layer.forward).parameters["average_attn_weights"].default
    w_query = ports.from_layout("torch", {k: _np(v) for k, v in layer.state_dict().items()}, num_heads)["w_query"]
    return {
        "bias": layer.in_proj_bias is not None,
        "dropout": float(layer.dropout),
        "averaged_weights": averaged,
        "w_query": w_query,
    }


# --- training ------------------------------------------------------------------


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
