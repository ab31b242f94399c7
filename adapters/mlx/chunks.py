"""MLX: Llama 4's attention as mlx-lm's llama4.py writes it (mx.fast.rope traditional, mx.fast.rms_norm with no
weight, the NoPE layers' query temperature, mx.fast.scaled_dot_product_attention with the chunks as its mask), and the
chunks from mlx.core's ops and through the fused kernel."""

import mlx.core as mx

from .bands import _projected
from .shared import _masked_weights, _mx, _np


def _chunked_hidden(padding, chunk):
    """[B, T, T], True = hidden: causal within chunks counted from each row's first real token, and the padding."""
    T, first = padding.shape[-1], mx.argmax(~padding, axis=-1)[:, None, None]
    i, j = mx.arange(T)[:, None] - first, mx.arange(T)[None, :] - first
    return (j > i) | (mx.floor_divide(j, chunk) != mx.floor_divide(i, chunk)) | padding[:, None, :]


def _zeroed(padding, t):  # a padding row's 0/0 (NaN) or uniform weights: a where, as attention_ref's masked_fill
    return mx.where(padding[..., :, None], mx.array(0, dtype=t.dtype), t)


def chunked_attention(x, w_query, w_key, w_value, chunk, padding):
    queries, keys, values = _projected(x, w_query, w_key, w_value)
    padding = _mx(padding)
    weights = _zeroed(padding, _masked_weights(queries @ keys.swapaxes(-1, -2), keys, _chunked_hidden(padding, chunk)))
    return {"weights": _np(weights), "context": _np(weights @ values)}


def chunked_flag(x, w_query, w_key, w_value, chunk, padding):
    queries, keys, values = (t[:, None] for t in _projected(x, w_query, w_key, w_value))  # [B, 1, T, H]
    padding = _mx(padding)
    attend = ~_chunked_hidden(padding, chunk)[:, None]  # MLX's boolean mask: True = the key takes part
    scale = queries.shape[-1] ** -0.5
    context = mx.fast.scaled_dot_product_attention(queries, keys, values, scale=scale, mask=attend)[:, 0]
    return _np(_zeroed(padding, context))


def llama4_attention(
    x, w_query, w_key, w_value, num_heads, num_kv_heads, use_rope, chunk, floor_scale, attn_scale, eps, start
):
    x = _mx(x)
    T, H = x.shape[-2], w_query.shape[-1] // num_heads

    def heads(t, n):  # (B, T, n*H) -> (B, n, T, H), as mlx-lm's reshape and transpose
        return t.reshape(*t.shape[:-1], n, H).swapaxes(-3, -2)

    queries = heads(x[..., start:, :] @ _mx(w_query), num_heads)
    keys, values = heads(x @ _mx(w_key), num_kv_heads), heads(x @ _mx(w_value), num_kv_heads)
    if use_rope:  # mlx-lm's nn.RoPE(traditional=True) at the cache's offset, then its weightless rms_norm
        queries = mx.fast.rms_norm(
            mx.fast.rope(queries, H, traditional=True, base=10000.0, scale=1.0, offset=start), None, eps
        )
        keys = mx.fast.rms_norm(mx.fast.rope(keys, H, traditional=True, base=10000.0, scale=1.0, offset=0), None, eps)
    elif attn_scale:
        wide = mx.float64 if queries.dtype == mx.float64 else mx.float32
        p = mx.arange(start + 1, T + 1).astype(wide)  # mlx-lm's mx.arange(offset + 1, offset + L + 1)
        scales = mx.log(mx.floor(p / floor_scale) + 1.0) * attn_scale + 1.0
        queries = (queries * scales[:, None]).astype(queries.dtype)
    i, j = mx.arange(start, T)[:, None], mx.arange(T)[None, :]
    hidden = (j > i) | ((mx.floor_divide(j, chunk) != mx.floor_divide(i, chunk)) if use_rope and chunk else False)
    context = mx.fast.scaled_dot_product_attention(queries, keys, values, scale=H**-0.5, mask=~hidden)
    return {
        "queries": _np(queries),
        "context": _np(context.swapaxes(-3, -2).reshape(*context.shape[:-3], -1, num_heads * H)),
    }
