"""Cross-attention (conventions.cross_attention): queries from the decoder's x, keys and values from the encoder's
memory of another length, its padding hidden from every query; and T5's bucketed relative position bias on unscaled
scores (conventions.t5_relative_bias)."""

import functools

import numpy as np

from .documents import blend, project, transposed_matmul
from .heads import _future, _masked_head, _masked_softmax
from .shared import _f64


def cross_attention(x, memory, w_query, w_key, w_value, num_heads, padding):
    """Head n's queries x W_query[:, n] against the memory's keys and values, scaled by 1/sqrt(H); `padding` [B, S],
    True = a padded memory token, hidden from every query (a sentence all padding: zero weights and context,
    conventions.fully_masked_rows). weights [B, N, T, S]; context the heads concatenated."""
    x, memory, w_query, w_key, w_value = _f64(x, memory, w_query, w_key, w_value)
    T, H = np.shape(x)[-2], np.shape(w_query)[-1] // num_heads
    queries, keys, values = project(x, w_query), project(memory, w_key), project(memory, w_value)
    padding = np.asarray(padding, dtype=bool)
    hidden = np.broadcast_to(padding[..., None, :], padding.shape[:-1] + (T, padding.shape[-1]))
    weights, contexts = [], []
    for n in range(num_heads):
        columns = slice(n * H, (n + 1) * H)
        w, c = _masked_head(queries[..., columns], keys[..., columns], values[..., columns], hidden)
        weights.append(w)
        contexts.append(c)
    return {"weights": np.stack(weights, axis=-3), "context": np.concatenate(contexts, axis=-1)}


def cross_attention_flag(x, memory, w_query, w_key, w_value, num_heads, padding):
    return cross_attention(x, memory, w_query, w_key, w_value, num_heads, padding)["context"]


@functools.lru_cache(maxsize=4096)
def _log_bucket(distance, num_buckets, max_distance):
    """T5's bucket for a distance past the exact ones: max_exact + floor(log(d / e) / log(m / e) * (n - e)), capped at
    n - 1 (e = n // 2), in integers: k <= that quotient exactly when d^(n-e) e^k >= m^k e^(n-e). No float, so no
    rounding decides a bucket where the quotient is an integer (a tie: d = 16, 32, 64 at T5's own 32 buckets, 128)."""
    exact = num_buckets // 2
    span = num_buckets - exact
    left = distance**span
    k = 0
    while k < span and left * exact ** (k + 1) >= max_distance ** (k + 1) * exact**span:
        k += 1
    return min(exact + k, num_buckets - 1)


def _t5_bucket(relative, num_buckets, max_distance, bidirectional):
    """T5's _relative_position_bucket of one key-minus-query distance `relative` (j - i): bidirectional, half the
    buckets for keys after the query (offset num_buckets / 2), half for the rest; not, only keys at or before it
    (a later key: bucket 0). Then the first half of a side's buckets exact, the rest logarithmic to max_distance."""
    offset = 0
    if bidirectional:
        num_buckets //= 2
        offset = num_buckets if relative > 0 else 0
        distance = abs(relative)
    else:
        distance = max(-relative, 0)
    exact = num_buckets // 2
    if max_distance <= exact:
        raise ValueError(f"max_distance {max_distance} must pass the {exact} exact buckets (T5 divides by its log)")
    return offset + (distance if distance < exact else _log_bucket(distance, num_buckets, max_distance))


def t5_relative_bias(query_length, key_length, num_buckets, max_distance, bidirectional):
    """buckets [query_length, key_length]: T5's bucket of j - i for query i, key j (positions from 0)."""
    return np.array(
        [
            [_t5_bucket(j - i, num_buckets, max_distance, bidirectional) for j in range(key_length)]
            for i in range(query_length)
        ],
        dtype=np.int64,
    ).reshape(query_length, key_length)


def t5_attention(x, w_query, w_key, w_value, num_heads, bias_table, num_buckets, max_distance, bidirectional, causal):
    """Head n's scores q k^T, not scaled (T5 folds 1/sqrt(H) into W_query's initialisation), plus
    bias_table[bucket(j - i), n], then the causal mask (if `causal`: T5's decoder) and the softmax."""
    x, w_query, w_key, w_value, bias_table = _f64(x, w_query, w_key, w_value, bias_table)
    T, H = np.shape(x)[-2], np.shape(w_query)[-1] // num_heads
    queries, keys, values = project(x, w_query), project(x, w_key), project(x, w_value)
    buckets = t5_relative_bias(T, T, num_buckets, max_distance, bidirectional)
    hidden = _future(T) if causal else np.zeros((T, T), dtype=bool)
    weights, contexts = [], []
    for n in range(num_heads):
        columns = slice(n * H, (n + 1) * H)
        scores = transposed_matmul(queries[..., columns], keys[..., columns])
        weights.append(_masked_softmax(scores + bias_table[buckets, n], hidden))
        contexts.append(blend(weights[-1], values[..., columns]))
    return {"weights": np.stack(weights, axis=-3), "context": np.concatenate(contexts, axis=-1)}


def _t5_ties(num_buckets, max_distance, bidirectional, reach, margin=1e-4):
    """The distances 1..reach whose T5 bucket a float computation decides by its rounding: log(d / e) / log(m / e) *
    (n - e) within `margin` of an integer (exactly one where d^(n-e) e^k = m^k e^(n-e): d = 16, 32, 64 at T5's own 32
    buckets and 128), the bucket not capped. There float32 and float64 code disagree (a search over 64 bucket counts
    and 19 distances: torch's float32 twice in 806,405 positions, float64 four times); the spec's cases and the fuzz
    draws keep clear of them, and the oracle's exact bucket stands elsewhere."""
    side = num_buckets // 2 if bidirectional else num_buckets
    exact = side // 2
    found = []
    for d in range(exact + 1, reach + 1):
        q = np.log(d / exact) / np.log(max_distance / exact) * (side - exact)
        if abs(q - round(q)) < margin and exact + round(q) < side:
            found.append(d)
    return found
