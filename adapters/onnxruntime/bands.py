"""ONNX Runtime: flash-attention's two-sided window and padded queries. Opset 23 has no window (band_flag is
NOT_APPLICABLE): the band is built in NumPy and hides keys through the graph's Where, as window_attention's does;
padded queries go through the graph and through the Attention operator with a boolean attn_mask."""

import numpy as np

from .heads import _causal_mask, _windowed, masked_attention
from .shared import _attend_one_head, _one_head, _run


def band_attention(x, w_query, w_key, w_value, left, right):
    # flash-attention's window_size=(left, right): key j hidden below i - left and above i + right, -1 no limit.
    T = np.shape(x)[-2]
    i, j = np.arange(T)[:, None], np.arange(T)
    hidden = ((j < i - left) if left >= 0 else False) | ((j > i + right) if right >= 0 else False)
    hidden = np.broadcast_to(hidden, (T, T))  # both sides unlimited leave a bare False
    out = _run(_windowed, x=x, queries=x, w_query=w_query, w_key=w_key, w_value=w_value, mask=hidden)
    return {"weights": out["weights"], "context": out["context"]}


def _hidden(padding, causal):
    """[B, T, T], True = hidden: the padding's keys from every query, and the future if causal."""
    B, T = padding.shape
    # [B, T, T] even when not causal: the float32 and float16 kernels broadcast no attn_mask query axis (cross.py)
    return np.broadcast_to(padding[:, None, :] | (_causal_mask(T, T) if causal else False), (B, T, T))


def _zeroed(value, padding):
    # attention_ref's masked_fill: a left-padded causal row sees no key, its softmax 0/0 (NaN) that a product keeps
    return np.where(padding[..., None], value.dtype.type(0), value)


def query_padding_attention(x, w_query, w_key, w_value, padding, causal):
    padding = np.asarray(padding, dtype=bool)
    out = masked_attention(x, w_query, w_key, w_value, _hidden(padding, causal))
    return {"weights": _zeroed(out["weights"], padding), "context": _zeroed(out["context"], padding)}


def query_padding_flag(x, w_query, w_key, w_value, padding, causal):
    padding = np.asarray(padding, dtype=bool)
    # [B, 1, T, T], True = the key takes part (ONNX's polarity); the float64 kernel's NaN on a row with no key
    # (attention_float64_nan_on_fully_padded_memory) lands on padding rows alone, zeroed here
    attend = ~_hidden(padding, causal)[:, None]
    context = _attend_one_head(x, *(_one_head(x, w) for w in (w_query, w_key, w_value)), mask=attend)
    return _zeroed(context, padding)
