"""MLX: flash-attention's two-sided window and padded queries, from mlx.core's ops and through
mx.fast.scaled_dot_product_attention (which takes no window: band_flag is NOT_APPLICABLE)."""

import mlx.core as mx

from .shared import _causal_mask, _masked_weights, _mx, _np


def _projected(x, w_query, w_key, w_value):
    x = _mx(x)
    return x @ _mx(w_query), x @ _mx(w_key), x @ _mx(w_value)


def band_attention(x, w_query, w_key, w_value, left, right):
    queries, keys, values = _projected(x, w_query, w_key, w_value)
    # flash-attention's window_size=(left, right): key j hidden below i - left and above i + right, -1 no limit.
    T = queries.shape[-2]
    i, j, hidden = mx.arange(T)[:, None], mx.arange(T), mx.zeros((T, T), dtype=mx.bool_)
    if left >= 0:
        hidden = hidden | (j < i - left)
    if right >= 0:
        hidden = hidden | (j > i + right)
    weights = _masked_weights(queries @ keys.swapaxes(-1, -2), keys, hidden)
    return {"weights": _np(weights), "context": _np(weights @ values)}


def _hidden(padding, causal):
    """[B, T, T], True = hidden: the padding's keys from every query, and the future if causal."""
    T = padding.shape[-1]
    return padding[..., None, :] | (_causal_mask(T, T) if causal else mx.zeros((T, T), dtype=mx.bool_))


def query_padding_attention(x, w_query, w_key, w_value, padding, causal):
    queries, keys, values = _projected(x, w_query, w_key, w_value)
    padding = _mx(padding)
    weights = _masked_weights(queries @ keys.swapaxes(-1, -2), keys, _hidden(padding, causal))
    # attention_ref's masked_fill, a where: a left-padded causal row sees no key and its softmax is 0/0 (NaN), which
    # a product by 0 would keep. A zeroed weights row then gives a zeroed context row.
    weights = mx.where(padding[..., :, None], mx.array(0, dtype=weights.dtype), weights)
    return {"weights": _np(weights), "context": _np(weights @ values)}


def query_padding_flag(x, w_query, w_key, w_value, padding, causal):
    queries, keys, values = (t[:, None] for t in _projected(x, w_query, w_key, w_value))  # [B, 1, T, H]
    padding = _mx(padding)
    attend = ~_hidden(padding, causal)[:, None]  # MLX's boolean mask: True = the key takes part
    scale = queries.shape[-1] ** -0.5
    context = mx.fast.scaled_dot_product_attention(queries, keys, values, scale=scale, mask=attend)[:, 0]
    # A padding row that sees no key comes back uniform from the kernel: zeroed by where, as attention_ref does.
    return _np(mx.where(padding[..., :, None], mx.array(0, dtype=context.dtype), context))
