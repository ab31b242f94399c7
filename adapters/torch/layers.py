"""PyTorch: the attention layers checkpoints are loaded into (attention_conformance.ports: every layout)."""

import inspect

import numpy as np
import torch
from torch import nn

from attention_conformance import ports

from .shared import _causal_mask, _map, _np, _on_numpy, _split_heads, _t


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
        "round_trip": _round_trip(layer, saved, num_heads),
    }


@_on_numpy
def _round_trip(layer, saved, num_heads):
    return ports.flat(ports.from_layout(ports.layer_layout(layer, "torch"), saved, num_heads))


# The ports' states come back as tensors: made in a traced op, a _t of NumPy in _gpt2_attention's generator would break
# the graph there, and a break inside a generator runs its whole frame eagerly (the attention math included).
@_on_numpy
def _torch_state(checkpoint, layer, num_heads, *weights):
    return _map(ports.layer_state(checkpoint, layer, "torch", num_heads, *weights), np.ndarray, _t)


@_on_numpy
def _torch_layout(num_heads, *weights):
    return _map(ports.to_layout("torch", ports.reference_weights(*weights), num_heads), np.ndarray, _t)


def attention_module(
    x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, causal, layer, checkpoint
):
    weights = (w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    return _layer_outputs(x, _torch_state(checkpoint, layer, num_heads, *weights), num_heads, causal, layer)


def layer_mask(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, mask):
    state = _torch_layout(num_heads, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    mha = _mha(state, num_heads, True, _t(x).dtype)
    x = _t(x)
    # attn_mask: True = not allowed to attend (the suite's polarity), [B * N, T, S] for a mask per sentence
    attn_mask = _t(mask).repeat_interleave(num_heads, dim=0)
    with torch.no_grad():
        context, _ = mha(x, x, x, attn_mask=attn_mask, need_weights=False)
    return _np(context)


def layer_key_padding(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, padding, causal):
    state = _torch_layout(num_heads, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    mha = _mha(state, num_heads, True, _t(x).dtype)
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
    w_query = _on_numpy(ports.from_layout)("torch", layer.state_dict(), num_heads)["w_query"]
    return {
        "bias": layer.in_proj_bias is not None,
        "dropout": float(layer.dropout),
        "averaged_weights": averaged,
        "w_query": w_query,
    }
