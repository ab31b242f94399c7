"""What is done to the scores before the softmax past the documents': soft-capping (Gemma 2; spec conventions.softcap)
and attention sinks (gpt-oss, StreamingLLM; conventions.sinks)."""

import numpy as np

from .documents import blend, project, scale, transposed_matmul
from .heads import _future, _masked_softmax
from .shared import _f64, tanh


def softcap_attention(x, w_query, w_key, w_value, cap, causal):
    """Gemma 2's order: the scaled scores capped, cap x tanh(s / cap), then the mask, then the softmax; a cap of 0 is
    no cap. A key the mask hides gets weight 0 however the scores were capped."""
    x, w_query, w_key, w_value = _f64(x, w_query, w_key, w_value)
    keys, values = project(x, w_key), project(x, w_value)
    scaled = scale(transposed_matmul(project(x, w_query), keys), np.shape(keys)[-1])
    if cap:
        (scaled,) = _f64(scaled)
        scaled = tanh(scaled / cap) * cap
    T = np.shape(x)[-2]
    weights = _masked_softmax(scaled, _future(T) if causal else np.zeros((T, T), dtype=bool))
    return {"weights": weights, "context": blend(weights, values)}


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
