"""Packed documents (conventions.packed_documents): documents end to end in one row, cut by their cumulative lengths
(flash-attn's cu_seqlens), each token attending within its own document, RoPE's positions restarting in each."""

import numpy as np

from .documents import project
from .heads import _masked_head
from .rotary import THETA, _cos_sin, _rotated
from .shared import _f64


def _documents(cu_seqlens):
    """Each token's document and its position inside it, from the cumulative lengths [0, .., T]."""
    offsets = np.asarray(cu_seqlens, dtype=np.int64)
    document = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    return document, np.arange(offsets[-1]) - offsets[document]


def _hidden(cu_seqlens, causal):
    """Key j hidden from query i: another document's, or (causal) one after i."""
    document, _ = _documents(cu_seqlens)
    i, j = np.arange(len(document))[:, None], np.arange(len(document))[None, :]
    return (document[:, None] != document[None, :]) | ((j > i) if causal else False)


def varlen_attention(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    return _documents_attended(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal, rotate=True)


def _documents_attended(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal, rotate):
    """Head n's queries and keys rotated (rotate_half over the head, theta 10000) at each token's position in its
    document, scaled by 1/sqrt(H), softmaxed over its own document's keys (up to the query if `causal`); a key of
    another document gets weight 0 (unrotated where `rotate` is false). queries [1, N, T, H]; weights [1, N, T, T];
    context the heads concatenated."""
    x, w_query, w_key, w_value = _f64(x, w_query, w_key, w_value)
    H = np.shape(w_query)[-1] // num_heads
    _, positions = _documents(cu_seqlens)
    cos, sin = _cos_sin(positions, H, THETA, "none", 1.0, x)
    queries, keys, values = project(x, w_query), project(x, w_key), project(x, w_value)
    hidden = _hidden(cu_seqlens, causal)
    turned, weights, contexts = [], [], []
    for n in range(num_heads):
        columns = slice(n * H, (n + 1) * H)
        q, k = queries[..., columns], keys[..., columns]
        turned.append(_rotated(q, cos, sin, "rotate_half", H) if rotate else q)
        k = _rotated(k, cos, sin, "rotate_half", H) if rotate else k
        w, c = _masked_head(turned[-1], k, values[..., columns], hidden)
        weights.append(w)
        contexts.append(c)
    return {
        "queries": np.stack(turned, axis=-3),
        "weights": np.stack(weights, axis=-3),
        "context": np.concatenate(contexts, axis=-1),
    }


def varlen_flag(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    context = varlen_attention(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal)["context"]
    return {"packed": context, "padded": context}


def varlen_unrotated_flag(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    context = _documents_attended(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal, rotate=False)["context"]
    return {"packed": context, "padded": context}
