"""PyTorch: FlexAttention (torch.nn.attention.flex_attention), torch's own route where SDPA takes no switch (the soft
cap as a score_mod, sliding and two-sided windows as a mask_mod's block mask) and, compiled, its route for a bias SDPA
takes whole (ALiBi, logits.py). The compiled column only: on the CPU flex_attention runs under torch.compile, and
eagerly it is an unfused debugging path (its own warning says)."""

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from .shared import _np, _t


# Inductor's CPU template for flex_attention reads the query's size off the buffer beneath its view
# (cpp_flex_attention_template.py: `query.data.data.layout.size`): traced, q, k and v as views of the projections'
# [B*T, H] matmul fail to lower, "ValueError: not enough values to unpack (expected 4, got 2)" (torch 2.13.0, measured;
# a clone is optimised away). They enter flex_attention's graph as its inputs, as from a model that calls a compiled
# flex_attention from eager code, the route flex_attention's documentation gives.
@torch.compiler.disable
def _graph_inputs(*tensors):
    return tuple(t.contiguous() for t in tensors)


def _flexed(queries, keys, values, score_mod=None, mask_mod=None):
    """flex_attention on [B, N, T, H] blocks. mask_mod(b, q, k) -> True where query q sees key k: one block mask for
    every sentence and head (B and H None), as the suite's masks of these ops are."""
    queries, keys, values = _graph_inputs(queries, keys, values)
    block_mask = None
    if mask_mod is not None:
        block_mask = create_block_mask(
            lambda b, h, q, k: mask_mod(b, q, k), None, None, queries.shape[-2], keys.shape[-2], device="cpu"
        )
    return flex_attention(queries, keys, values, score_mod=score_mod, block_mask=block_mask)


def _one_head(x, w_query, w_key, w_value, start=0, score_mod=None, mask_mod=None):
    """One head's context [.., T - start, H] through flex_attention, the queries from `start`: mask_mod's q is their
    absolute position (flex_attention's is the block's own row)."""
    x = _t(x)
    projected = (x[..., start:, :] @ _t(w_query), x @ _t(w_key), x @ _t(w_value))
    queries, keys, values = (t.reshape(-1, 1, *t.shape[-2:]) for t in projected)
    seen = None if mask_mod is None else (lambda b, q, k: mask_mod(b, q + start, k))
    context = _flexed(queries, keys, values, score_mod=score_mod, mask_mod=seen)
    return _np(context.reshape(*x.shape[:-2], *context.shape[-2:]))


def softcap_flag(x, w_query, w_key, w_value, cap, causal):
    # flex_attention scales the scores by 1/sqrt(H) before score_mod: Gemma 2's cap on the scaled scores, then the mask.
    capped = (lambda score, b, h, q, k: torch.tanh(score / cap) * cap) if cap else None
    return _one_head(
        x, w_query, w_key, w_value, score_mod=capped, mask_mod=(lambda b, q, k: k <= q) if causal else None
    )


def window_flag(x, w_query, w_key, w_value, window, start):
    # transformers' sliding_window_causal_overlay: key k seen by query q when q - window < k <= q.
    return _one_head(x, w_query, w_key, w_value, start, mask_mod=lambda b, q, k: (k <= q) & (k > q - window))


def band_flag(x, w_query, w_key, w_value, left, right):
    def seen(b, q, k):  # flash-attention's window_size=(left, right), -1 no limit on that side
        return ((k >= q - left) if left >= 0 else k >= 0) & ((k <= q + right) if right >= 0 else k >= 0)

    return _one_head(x, w_query, w_key, w_value, mask_mod=seen)
