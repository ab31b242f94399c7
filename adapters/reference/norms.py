"""QK-norm (spec conventions.qk_norm): RMSNorm on the queries and keys before RoPE, over each head's H dims (Qwen3,
Gemma 3) or over the whole projection's N*H (OLMo 2), the mean of squares plus eps under the root, times the weight."""

import numpy as np

from .documents import blend, project, scale, transposed_matmul
from .heads import _future, _masked_softmax
from .rotary import THETA, _cos_sin, _rotated
from .shared import _f64, fsum


def _rms_norm(t, weight, eps):
    """t / sqrt(mean(t^2) + eps) * weight over t's last axis: normed as a framework does it in float32 at least, stored
    in the dtype (HF's .to(input_dtype)), then times the weight (Qwen3's order; Gemma's and OLMo 2's multiply before
    the cast: one rounding fewer, inside this bound). No weight (None): Llama 4's L2Norm, the normed values stored."""
    (t,) = _f64(t)
    mean_square = fsum(t * t, axis=-1, keepdims=True) / np.shape(t)[-1]
    (normed,) = _f64(t / np.sqrt(mean_square + eps))
    return normed if weight is None else normed * weight


def qk_norm_attention(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
    """Queries and keys RMS-normed (per head: weights [H]; whole projection: [N*H]), then each head rotated
    (rotate_half, theta 10000, positions 0..T-1), scaled by 1/sqrt(H), masked (if `causal`) and softmaxed. queries: as
    they enter the scores, [.., N, T, H]; weights [.., N, T, S]; context the heads concatenated."""
    x, w_query, w_key, w_value, norm_weight_q, norm_weight_k = _f64(
        x, w_query, w_key, w_value, norm_weight_q, norm_weight_k
    )
    T, H = np.shape(x)[-2], np.shape(w_query)[-1] // num_heads
    queries, keys = _f64(project(x, w_query), project(x, w_key))  # the projections stored, then normed
    values = project(x, w_value)
    if not per_head:
        queries, keys = _rms_norm(queries, norm_weight_q, eps), _rms_norm(keys, norm_weight_k, eps)
    cos, sin = _cos_sin(np.arange(T), H, THETA, "none", 1.0, x)
    hidden = _future(T) if causal else np.zeros((T, T), dtype=bool)
    turned, weights, contexts = [], [], []
    for n in range(num_heads):
        q, k = queries[..., n * H : (n + 1) * H], keys[..., n * H : (n + 1) * H]
        if per_head:
            q, k = _rms_norm(q, norm_weight_q, eps), _rms_norm(k, norm_weight_k, eps)
        turned.append(_rotated(q, cos, sin, "rotate_half", H))
        scaled = scale(transposed_matmul(turned[-1], _rotated(k, cos, sin, "rotate_half", H)), H)
        weights.append(_masked_softmax(scaled, hidden))
        contexts.append(blend(weights[-1], values[..., n * H : (n + 1) * H]))
    return {
        "queries": np.stack(turned, axis=-3),
        "weights": np.stack(weights, axis=-3),
        "context": np.concatenate(contexts, axis=-1),
    }


def qk_norm_flag(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
    out = qk_norm_attention(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal)
    return {"queries": out["queries"], "context": out["context"]}
