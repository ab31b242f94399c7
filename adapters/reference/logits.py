"""What is done to the scores before the softmax past the documents': soft-capping (Gemma 2; spec conventions.softcap),
attention sinks (gpt-oss, StreamingLLM; conventions.sinks), ALiBi's linear biases (conventions.alibi), a scale of one's
own, a decoder's attention with every family at once, and the fused attention's paths where kernels switch."""

from decimal import Decimal, localcontext

import numpy as np

from attention_conformance import bounds, elementary

from .documents import blend, project, scale, transposed_matmul
from .heads import _future, _masked_head, _masked_softmax
from .rotary import THETA, _cos_sin, _rotated
from .shared import _f64, tanh


def _capped(scaled, cap):
    """A cap of 0 is no cap, as ONNX's softcap and FlashAttention's read it, not logits squashed to 0."""
    if not cap:
        return scaled
    (scaled,) = _f64(scaled)
    return tanh(scaled / cap) * cap


def attention_stages(x, w_query, w_key, w_value, cap, causal):
    """Gemma 2's order, as ONNX's Attention returns its stages: the scaled scores, capped, then the mask and the
    softmax. A key the mask hides gets weight 0 however the scores were capped."""
    x, w_query, w_key, w_value = _f64(x, w_query, w_key, w_value)
    keys = project(x, w_key)
    scaled = scale(transposed_matmul(project(x, w_query), keys), np.shape(keys)[-1])
    capped = _capped(scaled, cap)
    T = np.shape(x)[-2]
    weights = _masked_softmax(capped, _future(T) if causal else np.zeros((T, T), dtype=bool))
    return {"scaled": scaled, "capped": capped, "weights": weights}


def softcap_attention(x, w_query, w_key, w_value, cap, causal):
    weights = attention_stages(x, w_query, w_key, w_value, cap, causal)["weights"]
    return {"weights": weights, "context": blend(weights, project(*_f64(x, w_value)))}


def softcap_flag(x, w_query, w_key, w_value, cap, causal):
    return softcap_attention(x, w_query, w_key, w_value, cap, causal)["context"]


def sink_attention(x, w_query, w_key, w_value, sinks, num_heads, mask):
    """gpt-oss's sinks: head n's logit sinks[n] joins each row's softmax as one more key, visible to every query, that
    has no value; the row's weights then sum to less than 1, and a row whose every key is hidden gives everything to
    the sink (its context 0). weights [.., N, T, S] without the sink's column; context the heads concatenated."""
    x, w_query, w_key, w_value, sinks = _f64(x, w_query, w_key, w_value, sinks)
    H = np.shape(w_query)[-1] // num_heads
    queries, keys, values = project(x, w_query), project(x, w_key), project(x, w_value)
    hidden = np.asarray(mask, dtype=bool)
    hidden = np.concatenate([hidden, np.zeros(hidden.shape[:-1] + (1,), dtype=bool)], axis=-1)
    weights, contexts = [], []
    for n in range(num_heads):
        columns = slice(n * H, (n + 1) * H)
        scaled = scale(transposed_matmul(queries[..., columns], keys[..., columns]), H)
        sink = np.broadcast_to(sinks[n], np.shape(scaled)[:-1] + (1,))
        weights.append(_masked_softmax(np.concatenate([scaled, sink], axis=-1), hidden)[..., :-1])
        contexts.append(blend(weights[-1], values[..., columns]))
    return {"weights": np.stack(weights, axis=-3), "context": np.concatenate(contexts, axis=-1)}


def fused_sink_attention(x, w_query, w_key, w_value, sinks, num_heads, mask):
    return sink_attention(x, w_query, w_key, w_value, sinks, num_heads, mask)["context"]


def alibi_slopes(num_heads):
    """BLOOM's rule: c = 2 ** floor(log2 N) heads take (2 ** (-8 / c)) ** p, p = 1..c (the paper's geometric sequence
    for a power of two), the other N - c take (2 ** (-8 / 2c)) ** p, p = 1, 3, 5, ..: every other slope of 2c heads.
    Decimal arithmetic to float64's last bit (the same bytes on every machine); with a bound, as a framework computes
    them, in float32 at least (BLOOM's), stored in the dtype."""
    num_heads = int(num_heads)
    closest = 2 ** (num_heads.bit_length() - 1)
    powers = np.array(list(range(1, closest + 1)) + list(range(1, 2 * (num_heads - closest), 2)), dtype=np.float64)
    spans = np.array([closest] * closest + [2 * closest] * (num_heads - closest), dtype=np.float64)
    with localcontext() as exact:
        exact.prec = 40
        values = np.array([float(Decimal(2) ** (Decimal(-8 * int(p)) / int(s))) for p, s in zip(powers, spans)])
    if bounds.units() is None:
        return values
    with bounds.in_float32_at_least():
        slopes = elementary.power(values, 2.0, 8 * powers / spans, raised=powers)
    return _f64(slopes)[0]


def alibi_attention(x, w_query, w_key, w_value, num_heads, causal):
    """Head n's scaled scores plus slopes[n] * (j - i), query i and key j (a past key's bias negative), the bias made
    in the slopes' precision and stored in the dtype; then the causal mask, the softmax. weights [.., N, T, S]; context
    the heads concatenated."""
    x, w_query, w_key, w_value = _f64(x, w_query, w_key, w_value)
    T, H = np.shape(x)[-2], np.shape(w_query)[-1] // num_heads
    queries, keys, values = project(x, w_query), project(x, w_key), project(x, w_value)
    slopes, distance = alibi_slopes(num_heads), np.arange(T)[None, :] - np.arange(T)[:, None]
    hidden = _future(T) if causal else np.zeros((T, T), dtype=bool)
    weights, contexts = [], []
    for n in range(num_heads):
        columns = slice(n * H, (n + 1) * H)
        (bias,) = _f64(slopes[n] * distance.astype(np.float64))
        scaled = scale(transposed_matmul(queries[..., columns], keys[..., columns]), H)
        weights.append(_masked_softmax(scaled + bias, hidden))
        contexts.append(blend(weights[-1], values[..., columns]))
    return {"weights": np.stack(weights, axis=-3), "context": np.concatenate(contexts, axis=-1)}


def alibi_flag(x, w_query, w_key, w_value, num_heads, causal):
    return alibi_attention(x, w_query, w_key, w_value, num_heads, causal)["context"]


def scale_flag(x, w_query, w_key, w_value, softmax_scale, causal):
    """ONNX's route: queries and keys each multiplied by sqrt(softmax_scale) before their product (against overflow,
    its specification says); that route's bound covers scaling the product once, as most kernels do."""
    x, w_query, w_key, w_value = _f64(x, w_query, w_key, w_value)
    root = float(np.sqrt(softmax_scale))
    if bounds.units() is not None:
        # A kernel that scales the product once stores q k^T first: beyond the dtype's range there it overflows, as
        # Keras's float16 did at a scale of 1/16 (fuzz, seed 0): the dtype's range, not rounding, as for every op.
        bounds.stored(transposed_matmul(project(x, w_query), project(x, w_key)))
    scores = transposed_matmul(project(x, w_query) * root, project(x, w_key) * root)
    T = np.shape(x)[-2]
    weights = _masked_softmax(scores, _future(T) if causal else np.zeros((T, T), dtype=bool))
    return blend(weights, project(x, w_value))


def _value(a):  # a number to decide by, whether or not it carries a bound
    return a.value if isinstance(a, bounds.Bounded) else np.asarray(a)


def decoder_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, pairing, window, cap, sinks):
    """Every family at once, as a decoder layer computes them: query head n over K/V head n // (N / num_kv_heads),
    both turned whole at positions 0..T-1, the scaled scores capped, a causal window, and head n's sink joining its
    softmax; a sink of -inf takes nothing (exp(-inf) = 0) and is left out."""
    x, w_query, w_key, w_value, sinks = _f64(x, w_query, w_key, w_value, sinks)
    T, H = np.shape(x)[-2], np.shape(w_query)[-1] // num_heads
    cos, sin = _cos_sin(np.arange(T), H, THETA, "none", 1.0, x)
    queries, keys, values = project(x, w_query), project(x, w_key), project(x, w_value)
    hidden, group = _future(T, window), num_heads // num_kv_heads
    contexts = []
    for n in range(num_heads):
        kv = slice(n // group * H, (n // group + 1) * H)
        q = _rotated(queries[..., n * H : (n + 1) * H], cos, sin, pairing, H)
        scaled = _capped(scale(transposed_matmul(q, _rotated(keys[..., kv], cos, sin, pairing, H)), H), cap)
        if np.isneginf(_value(sinks)[n]):
            weights = _masked_softmax(scaled, hidden)
        else:
            sink = np.broadcast_to(sinks[n], np.shape(scaled)[:-1] + (1,))
            with_sink = np.concatenate([hidden, np.zeros((T, 1), dtype=bool)], axis=-1)
            weights = _masked_softmax(np.concatenate([scaled, sink], axis=-1), with_sink)[..., :-1]
        contexts.append(blend(weights, values[..., kv]))
    return np.concatenate(contexts, axis=-1)


def sink_decode_paths(x, w_query, w_key, w_value, num_heads, num_kv_heads, sinks, start):
    """Query p of start..T-1 over keys 0..p, query head n over K/V head n // (N / num_kv_heads) and its sink; both
    paths are the same rows of the causal pass. Only those rows are computed (each row's numbers are the whole pass's:
    projections and products go row by row), so one query over thousands of keys costs one row."""
    x, w_query, w_key, w_value, sinks = _f64(x, w_query, w_key, w_value, sinks)
    T, H = np.shape(x)[-2], np.shape(w_query)[-1] // num_heads
    queries, keys, values = project(x[..., start:, :], w_query), project(x, w_key), project(x, w_value)
    hidden, group = _future(T, start=start), num_heads // num_kv_heads
    heads = []
    for n in range(num_heads):
        kv = slice(n // group * H, (n // group + 1) * H)
        q, k, v = queries[..., n * H : (n + 1) * H], keys[..., kv], values[..., kv]
        if np.isneginf(_value(sinks)[n]):
            heads.append(_masked_head(q, k, v, hidden)[1])
            continue
        scaled = scale(transposed_matmul(q, k), H)
        sink = np.broadcast_to(sinks[n], np.shape(scaled)[:-1] + (1,))
        with_sink = np.concatenate([hidden, np.zeros((T - start, 1), dtype=bool)], axis=-1)
        heads.append(blend(_masked_softmax(np.concatenate([scaled, sink], axis=-1), with_sink)[..., :-1], v))
    heads = np.stack(heads, axis=-3)
    return {"batched": heads, "alone": heads}


def decode_paths(x, w_query, w_key, w_value, num_heads, num_kv_heads, start):
    return sink_decode_paths(x, w_query, w_key, w_value, num_heads, num_kv_heads, [-np.inf] * num_heads, start)
