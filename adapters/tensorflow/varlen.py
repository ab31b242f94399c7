"""TensorFlow: packed documents (conventions.packed_documents) from cu_seqlens with TensorFlow's ops: each token's
document by tf.searchsorted, its position restarting there for keras-hub's rotate_half RoPE, the document mask into
the textbook softmax and into keras.ops.dot_product_attention on the packed row (Keras has no varlen route), and the
documents gathered into a padded batch [n, longest, N, H] for the same op. tf.RaggedTensor (row_splits are
cu_seqlens) is TensorFlow's own varlen type, but XLA cannot compile it ("No registered 'RaggedRange' OpKernel for
XLA_CPU_JIT devices", measured), so the compiled mode would refuse it; these ops compile. varlen_unrotated_flag is
varlen_flag with the rotation switched off."""

import math

import keras
import numpy as np
import tensorflow as tf

from .cross import _merged
from .modes import _compiled_part, _compiles_parts
from .rotary import _rotate
from .shared import _np, _split_heads, _swap_tokens_and_heads, _t


def _documents(cu_seqlens, T):
    """Each token's document and its position in it."""
    offsets = _t(cu_seqlens)
    tokens = tf.range(T, dtype=offsets.dtype)
    # A token's document is the first whose end lies after it.
    document = tf.searchsorted(offsets[1:], tokens, side="right", out_type=offsets.dtype)
    return document, tokens - tf.gather(offsets, document)


def _rotated_heads(x, w_query, w_key, w_value, num_heads, cu_seqlens, rotate=True):
    x = _t(x)
    H = w_query.shape[-1] // num_heads
    queries, keys, values = (_split_heads(tf.linalg.matmul(x, _t(w)), num_heads, H) for w in (w_query, w_key, w_value))
    if not rotate:  # flash_attn_varlen_func's own arithmetic: whatever rotated q and k did so before it
        return queries, keys, values
    _, positions = _documents(cu_seqlens, x.shape[-2])
    return _rotate(queries, positions, "rotate_half", H), _rotate(keys, positions, "rotate_half", H), values


def _attend(cu_seqlens, T, causal):
    """Keras's bool mask, True = take part: the same document, and (causal) not after the query."""
    document, _ = _documents(cu_seqlens, T)
    same = document[:, None] == document[None, :]
    return same & (tf.range(T)[None, :] <= tf.range(T)[:, None]) if causal else same


def varlen_attention(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    queries, keys, values = _rotated_heads(x, w_query, w_key, w_value, num_heads, cu_seqlens)
    scores = tf.linalg.matmul(queries, keys, transpose_b=True) / math.sqrt(queries.shape[-1])
    hidden = tf.logical_not(_attend(cu_seqlens, scores.shape[-1], causal))
    weights = tf.nn.softmax(tf.where(hidden, tf.constant(-math.inf, scores.dtype), scores), axis=-1)
    context = _merged(tf.linalg.matmul(weights, values))
    return {"queries": _np(queries), "weights": _np(weights), "context": _np(context)}


def _fused(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal, longest, rotate):
    queries, keys, values = _rotated_heads(x, w_query, w_key, w_value, num_heads, cu_seqlens, rotate)
    T = queries.shape[-2]
    Q, K, V = (tf.transpose(t, _swap_tokens_and_heads(4)) for t in (queries, keys, values))  # [1, T, N, H]
    packed = keras.ops.dot_product_attention(Q, K, V, mask=_attend(cu_seqlens, T, causal))
    # The padded batch: document b's row j is token cu[b] + j; past its end whatever token follows (the row's last
    # at most), its key hidden by the mask and its query's row dropped.
    offsets, j = _t(cu_seqlens), tf.range(longest, dtype=tf.int64)
    lengths = offsets[1:] - offsets[:-1]
    rows = tf.minimum(offsets[:-1, None] + j[None, :], T - 1)
    attend = (j[None, :] < lengths[:, None])[:, None, None, :]  # [n, 1, 1, longest]: a document's own keys
    if causal:
        attend = attend & (j[None, :] <= j[:, None])  # right padding: the diagonal stays at the top left
    padded = keras.ops.dot_product_attention(*(tf.gather(t[0], rows) for t in (Q, K, V)), mask=attend)
    document, positions = _documents(cu_seqlens, T)
    back = tf.gather_nd(padded, tf.stack([document, positions], axis=-1))[tf.newaxis]
    return {"packed": tf.reshape(packed, [1, T, -1]), "padded": tf.reshape(back, [1, T, -1])}


def _flagged(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal, rotate):
    longest = int(np.diff(cu_seqlens).max())
    out = _compiled_part(_fused)(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal, longest, rotate)
    return {name: _np(t) for name, t in out.items()}


@_compiles_parts  # XLA needs the padded batch's length static: a host int, as flash-attn's max_seqlen is
def varlen_flag(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    return _flagged(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal, rotate=True)


@_compiles_parts
def varlen_unrotated_flag(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    return _flagged(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal, rotate=False)
