"""JAX: flash-attention's two-sided window and padded queries, from jax.numpy and through
jax.nn.dot_product_attention."""

import jax
import jax.numpy as jnp

from .shared import _causal_mask, _compiled, _masked_weights


def _projected(x, w_query, w_key, w_value):
    x = jnp.asarray(x)
    return x @ jnp.asarray(w_query), x @ jnp.asarray(w_key), x @ jnp.asarray(w_value)


@_compiled("left", "right")
def band_attention(x, w_query, w_key, w_value, left, right):
    queries, keys, values = _projected(x, w_query, w_key, w_value)
    # flash-attention's window_size=(left, right): key j hidden below i - left and above i + right, -1 no limit.
    i, j = jnp.arange(x.shape[-2])[:, None], jnp.arange(x.shape[-2])
    hidden = ((j < i - left) if left >= 0 else False) | ((j > i + right) if right >= 0 else False)
    weights = _masked_weights(queries @ jnp.swapaxes(keys, -1, -2), keys, hidden)
    return {"weights": weights, "context": weights @ values}


@_compiled("left", "right", eager_float16=True)
def band_flag(x, w_query, w_key, w_value, left, right):
    T = x.shape[-2]
    # local_window_size takes no -1: a negative side hides every key (query <= key + left), so T stands for no limit.
    window = tuple(side if side >= 0 else T for side in (left, right))
    heads = jax.nn.dot_product_attention(
        *(t[..., None, :] for t in _projected(x, w_query, w_key, w_value)), local_window_size=window
    )  # [B, T, N=1, H]
    return heads[..., 0, :]


@_compiled("causal")
def query_padding_attention(x, w_query, w_key, w_value, padding, causal):
    queries, keys, values = _projected(x, w_query, w_key, w_value)
    padding = jnp.asarray(padding)
    hidden = padding[..., None, :] | (_causal_mask(padding.shape[-1]) if causal else False)
    weights = _masked_weights(queries @ jnp.swapaxes(keys, -1, -2), keys, hidden)
    # attention_ref's masked_fill, a where: a left-padded causal row sees no key and its softmax is 0/0 (NaN), which
    # a product by 0 would keep. A zeroed weights row then gives a zeroed context row.
    weights = jnp.where(padding[..., :, None], jnp.zeros((), weights.dtype), weights)
    return {"weights": weights, "context": weights @ values}


@_compiled("causal", eager_float16=True)
def query_padding_flag(x, w_query, w_key, w_value, padding, causal):
    padding = jnp.asarray(padding)
    # The boolean mask, not query_seq_lengths / key_value_seq_lengths: those count real tokens from the start, and
    # left padding has its real tokens at the end. jax's mask polarity: True = the key takes part.
    heads = jax.nn.dot_product_attention(
        *(t[..., None, :] for t in _projected(x, w_query, w_key, w_value)),
        mask=~padding[:, None, None, :],
        is_causal=causal,
    )[..., 0, :]  # [B, T, H]
    # A padding row that sees no key comes back uniform (jax fills hidden scores with a finite large negative).
    return jnp.where(padding[..., :, None], jnp.zeros((), heads.dtype), heads)
