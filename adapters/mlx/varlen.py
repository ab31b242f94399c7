"""MLX: packed documents (conventions.packed_documents) as a padding-free run writes them: positions restarting in each
document, the document mask built from cu_seqlens with mlx.core's ops, and mx.fast.scaled_dot_product_attention on
the packed row (its boolean mask, True = attend: MLX has no varlen route) and on the documents padded into a batch.

Both paths rotate from ops (rotary._rotate, mlx-lm's rotate_half written out) at each token's position in its
document: mx.fast.rope takes one offset per batch row, not per token, so a packed row's restarts would take one kernel
call per document; rotated once, both fused paths get the same heads and differ in the attention alone.
varlen_unrotated_flag is varlen_flag with the rotation switched off."""

import mlx.core as mx

from .cross import _merged
from .rotary import _rotate
from .shared import _mx, _np, _split_heads


def _documents(cu_seqlens):
    """Each token's document (the cuts at or before it) and its position in it."""
    offsets = mx.array(cu_seqlens)  # int64, not the dtype under test: _mx would cast it
    tokens = mx.arange(int(cu_seqlens[-1]))
    document = (tokens[:, None] >= offsets[None, 1:-1]).sum(axis=-1)
    return document, tokens - offsets[document]


def _rotated_heads(x, w_query, w_key, w_value, num_heads, cu_seqlens, rotate=True):
    x = _mx(x)
    H = w_query.shape[-1] // num_heads
    queries, keys, values = (_split_heads(x @ _mx(w), num_heads) for w in (w_query, w_key, w_value))
    if not rotate:  # flash_attn_varlen_func's own arithmetic: whatever rotated q and k did so before it
        return queries, keys, values
    _, positions = _documents(cu_seqlens)
    return _rotate(queries, positions, "rotate_half", H), _rotate(keys, positions, "rotate_half", H), values


def _attend(cu_seqlens, causal):
    """The fused kernel's boolean mask, True = attend: the same document, and (causal) not after the query."""
    document, _ = _documents(cu_seqlens)
    same = document[:, None] == document[None, :]
    return same & mx.tril(mx.ones(same.shape, dtype=mx.bool_)) if causal else same


def varlen_attention(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    queries, keys, values = _rotated_heads(x, w_query, w_key, w_value, num_heads, cu_seqlens)
    scores = queries @ keys.swapaxes(-1, -2) / queries.shape[-1] ** 0.5
    weights = mx.softmax(mx.where(_attend(cu_seqlens, causal), scores, -mx.inf), axis=-1)
    return {"queries": _np(queries), "weights": _np(weights), "context": _np(_merged(weights @ values))}


def _padded(queries, keys, values, cu_seqlens, causal):
    """The documents as a batch [n, N, longest, H], padded at the end, through the fused kernel; rows back in order."""
    bounds = [(int(a), int(b)) for a, b in zip(cu_seqlens[:-1], cu_seqlens[1:])]
    longest = max(b - a for a, b in bounds)

    def batch(t):
        return mx.stack([mx.pad(t[0, :, a:b], [(0, 0), (0, longest - (b - a)), (0, 0)]) for a, b in bounds])

    j = mx.arange(longest)
    attend = j[None, None, None, :] < mx.array([b - a for a, b in bounds])[:, None, None, None]  # a document's keys
    if causal:
        attend = attend & (j[None, :] <= j[:, None])  # right padding: the diagonal stays at the top left
    scale = queries.shape[-1] ** -0.5
    context = mx.fast.scaled_dot_product_attention(batch(queries), batch(keys), batch(values), scale=scale, mask=attend)
    return mx.concatenate([c[:, : b - a] for c, (a, b) in zip(context, bounds)], axis=-2)[None]


def _flagged(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal, rotate):
    queries, keys, values = _rotated_heads(x, w_query, w_key, w_value, num_heads, cu_seqlens, rotate)
    scale = queries.shape[-1] ** -0.5
    packed = mx.fast.scaled_dot_product_attention(queries, keys, values, scale=scale, mask=_attend(cu_seqlens, causal))
    padded = _padded(queries, keys, values, cu_seqlens, causal)
    return {"packed": _np(_merged(packed)), "padded": _np(_merged(padded))}


def varlen_flag(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    return _flagged(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal, rotate=True)


def varlen_unrotated_flag(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    return _flagged(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal, rotate=False)
