"""A decoder's K/V heads tiled (the whole set repeated N / K times) instead of each repeated in place: query head 1
meets K/V head 1 where Llama's repeat_kv gives it head 0. MQA, one K/V head, cannot tell."""

import torch

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.rotary import _rotate
from attention_conformance.adapters.torch.shared import _np, _split_heads, _t

EXPECTED = "caught"
MUST_FAIL = ("decoder_mistral", "decoder_gemma2", "decoder_gpt_oss")


def decoder_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, pairing, window, cap, sinks):
    x = _t(x)
    T, H, group = x.shape[-2], w_query.shape[-1] // num_heads, num_heads // num_kv_heads
    positions = torch.arange(T)
    queries = _rotate(_split_heads(x @ _t(w_query), num_heads, H), positions, pairing, H)
    keys = _rotate(_split_heads(x @ _t(w_key), num_kv_heads, H), positions, pairing, H).repeat(1, group, 1, 1)
    values = _split_heads(x @ _t(w_value), num_kv_heads, H).repeat(1, group, 1, 1)  # the bug: tiled
    attn_scores = queries @ keys.mT / H**0.5
    if cap:
        attn_scores = torch.tanh(attn_scores / cap) * cap
    i, j = positions[:, None], positions
    attn_scores = attn_scores.masked_fill((j > i) | (j <= i - window), -torch.inf)
    sink = _t(sinks).reshape(num_heads, 1, 1).expand(*attn_scores.shape[:-1], 1)
    weights = torch.softmax(torch.cat([attn_scores, sink], dim=-1), dim=-1)[..., :-1]
    return _np((weights @ values).transpose(-3, -2).flatten(-2))
