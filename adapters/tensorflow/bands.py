"""TensorFlow: flash-attention's two-sided window and padded queries, from TensorFlow's ops and through
keras.ops.dot_product_attention with a boolean mask (which takes no window: band_flag is NOT_APPLICABLE)."""

import keras
import tensorflow as tf

from .shared import _causal_mask, _masked_weights, _np, _t


def _projected(x, w_query, w_key, w_value):
    x = _t(x)
    return (tf.linalg.matmul(x, _t(w)) for w in (w_query, w_key, w_value))


def band_attention(x, w_query, w_key, w_value, left, right):
    queries, keys, values = _projected(x, w_query, w_key, w_value)
    # flash-attention's window_size=(left, right): key j hidden below i - left and above i + right, -1 no limit.
    T = queries.shape[-2]
    i, j = tf.range(T)[:, None], tf.range(T)[None, :]
    hidden = tf.zeros([T, T], tf.bool)
    if left >= 0:
        hidden |= j < i - left
    if right >= 0:
        hidden |= j > i + right
    weights = _masked_weights(tf.linalg.matmul(queries, keys, transpose_b=True), keys, hidden)
    return {"weights": _np(weights), "context": _np(tf.linalg.matmul(weights, values))}


def _hidden(padding, causal):
    """[B, T, T], True = hidden: the padding's keys from every query, and the future if causal."""
    hidden = padding[:, tf.newaxis, :]
    return (hidden | _causal_mask(padding.shape[-1])) if causal else hidden


def _zeroed(rows, t):
    # attention_ref's masked_fill, a where: a left-padded causal row sees no key and its softmax is 0/0 (NaN), which
    # a product by 0 would keep.
    return tf.where(rows[..., tf.newaxis], tf.zeros([], t.dtype), t)


def query_padding_attention(x, w_query, w_key, w_value, padding, causal):
    queries, keys, values = _projected(x, w_query, w_key, w_value)
    padding = _t(padding)
    weights = _masked_weights(tf.linalg.matmul(queries, keys, transpose_b=True), keys, _hidden(padding, causal))
    weights = _zeroed(padding, weights)
    return {"weights": _np(weights), "context": _np(_zeroed(padding, tf.linalg.matmul(weights, values)))}


def query_padding_flag(x, w_query, w_key, w_value, padding, causal):
    Q, K, V = (t[..., tf.newaxis, :] for t in _projected(x, w_query, w_key, w_value))  # [B, T, N=1, H]
    padding = _t(padding)
    attend = tf.logical_not(_hidden(padding, causal))[:, tf.newaxis]  # Keras's bool mask: True = the key takes part
    context = keras.ops.dot_product_attention(Q, K, V, mask=attend)[..., 0, :]
    # A padding row that sees no key comes back uniform from Keras's most-negative fill: zeroed, as attention_ref does.
    return _np(_zeroed(padding, context))
