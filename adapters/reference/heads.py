"""Masks, causal order, decoding, sliding windows, dropout, several heads and grouped heads."""

import numpy as np

from attention_conformance import bounds, deterministic, sides
from attention_conformance.remembered import remembered

from .documents import blend, project, scale, softmax, transposed_matmul
from .shared import _bounded, _f64, _remembering, _zeros, exp, fsum, mm


def _masked_softmax(scaled, hidden, keys=None):
    """`keys`: the row's length where `scaled` holds only its first keys, the rest hidden."""
    return _on_side(_softmax_of_visible(scaled, hidden, keys), hidden)


def _on_side(weights, hidden):
    """A row with every key hidden as the side taken computes it (sides.py): the spec's zeros, the textbook's 0/0, or
    one weight for every key where a finite fill left every score equal (the fill's 1, summed and divided: rounded)."""
    choice = sides.of("fully_masked_rows")
    if choice == "zeros":
        return weights
    empty = np.broadcast_to(hidden, weights.shape).all(axis=-1, keepdims=True)
    n = weights.shape[-1]
    fill = np.nan if choice == "nan" else 1.0 / n
    if not _bounded(weights):
        return np.where(empty, fill, weights)
    store, accumulate, _ = bounds.units()
    err = 0.0 if choice == "nan" else fill * (2 * store + n * accumulate)
    return bounds.Bounded(np.where(empty, fill, weights.value), np.where(empty, err, weights.err))


def _softmax_of_visible(scaled, hidden, keys=None):
    if _bounded(scaled):
        return bounds.softmax(scaled, hidden)
    shape = np.broadcast_shapes(np.shape(scaled), np.shape(hidden))
    scaled, hidden = np.broadcast_to(np.asarray(scaled, dtype=np.float64), shape), np.broadcast_to(hidden, shape)
    with np.errstate(all="ignore"):  # rows a piece of the CPU's cache at a time: the whole's bytes, faster
        return deterministic.in_pieces(lambda *rows: (_visible_weights(*rows, keys),), scaled, hidden, rows=True)[0]


def _visible_weights(scaled, hidden, keys):
    filled = np.where(hidden, -np.inf, scaled)  # the -inf before softmax trick
    row_max = filled.max(axis=-1, keepdims=True)
    empty = np.isneginf(row_max)  # every key hidden: nothing to attend to
    e = np.where(hidden, 0.0, exp(filled - np.where(empty, 0.0, row_max)))
    padded = e if keys is None else np.concatenate([e, np.zeros(e.shape[:-1] + (keys - e.shape[-1],))], axis=-1)
    total = fsum(padded, axis=-1, keepdims=True)  # the hidden keys' zeros too: the same pairs as the whole row's
    return np.where(empty, 0.0, e / np.where(empty, 1.0, total))


_ROWS = 128  # query rows at a time in _masked_head: a (128, S) block stays in the CPU's cache (measured fastest)


def _masked_head(q, k, v, hidden):
    """blend(_masked_softmax(scale(q k^T)), v) for one head: (weights, context), in blocks of query rows, each only up
    to its last visible key. On GPT-2's causal shape that is half the work, in pieces that fit the CPU's cache, and, for
    finite inputs (the spec's), every number is the one the whole computation gives (a NaN in v would reach a fully
    hidden block there, not here): the products' slices are per row and per column (deterministic.matmul skips a's
    all-zero last columns), and the softmax's sum pairs the same terms, the hidden keys' zeros included."""
    T, S = q.shape[-2], k.shape[-2]
    hidden = np.broadcast_to(hidden, np.broadcast_shapes(np.shape(hidden), q.shape[:-2] + (T, S)))
    weights = _zeros(hidden.shape, q)
    context = _zeros(hidden.shape[:-1] + v.shape[-1:], q)
    for start in range(0, T, _ROWS):
        rows = slice(start, start + _ROWS)
        seen = np.flatnonzero(~hidden[..., rows, :].all(axis=tuple(range(hidden.ndim - 1))))
        whole = sides.of("fully_masked_rows") != "zeros"  # a row with no key seen has a weight for every key there
        if seen.size == 0 and not whole:
            continue  # every key hidden from these queries: zero weights, zero context
        last = S if whole else seen[-1] + 1
        scaled = scale(transposed_matmul(q[..., rows, :], k[..., :last, :]), q.shape[-1])
        weights[..., rows, :last] = _masked_softmax(scaled, hidden[..., rows, :last], S)
        context[..., rows, :] = blend(weights[..., rows, :], v)
    return weights, context


def masked_attention(x, w_query, w_key, w_value, mask):
    keys, values = project(x, w_key), project(x, w_value)  # the steps of attention(), less its unmasked softmax
    attn_scores = transposed_matmul(project(x, w_query), keys)
    weights = _masked_softmax(scale(attn_scores, keys.shape[-1]), np.asarray(mask, dtype=bool))
    return {"weights": weights, "context": blend(weights, values)}


def mask_conventions(x, w_query, w_key, w_value, mask, api, fill):
    """Whatever the API's polarity or fill, the masked attention of the suite's mask (True = hidden):
    a hidden key gets weight exactly 0 (exp(-1e9) and exp(dtype min) are 0 in float64 too)."""
    return masked_attention(x, w_query, w_key, w_value, mask)["context"]


def _future(T, window=None, start=0):
    """Key j hidden from query i: the future (j > i), and with a window the keys j <= i - window; the rows of queries
    start..T-1 only (a decode over 65,536 keys would otherwise build 4 GB of mask to keep the last row)."""
    i, j = np.arange(start, T)[:, None], np.arange(T)[None, :]
    return (j > i) | (j <= i - window) if window else j > i


def causal_attention(x, w_query, w_key, w_value):
    return masked_attention(x, w_query, w_key, w_value, _future(np.shape(x)[-2]))


def decode_attention(x, w_query, w_key, w_value, start):
    """Decoding: the queries at absolute positions start..T-1 over all T keys, query p seeing keys
    0..p (the mask's diagonal is offset by `start`: bottom-right aligned). Token by token with a KV
    cache is the same computation, so both outputs are rows start.. of the full causal pass."""
    context = causal_attention(x, w_query, w_key, w_value)["context"][..., start:, :]
    return {"context": context, "stepwise": context}


def window_attention(x, w_query, w_key, w_value, window, start):
    """Sliding window (conventions.sliding_window): causal, query p seeing the `window` keys p-window+1..p, for
    the queries start..T-1; as decode_attention, rows start.. of the whole sequence's pass."""
    out = masked_attention(x, w_query, w_key, w_value, _future(np.shape(x)[-2], window))
    return {name: value[..., start:, :] for name, value in out.items()}


def window_flag(x, w_query, w_key, w_value, window, start):  # what a sliding-window switch must compute on the block
    if sides.of("sliding_window") == "top_left":
        return _top_left(x, w_query, w_key, w_value, start, window)
    return window_attention(x, w_query, w_key, w_value, window, start)["context"]


def causal_flag(x, w_query, w_key, w_value, start):  # what a causal flag must compute on the block: decoding's
    if sides.of("causal_alignment") == "top_left":
        return _top_left(x, w_query, w_key, w_value, start)
    return decode_attention(x, w_query, w_key, w_value, start)["context"]


def _top_left(x, w_query, w_key, w_value, start, window=None):
    """A flag aligned top left (sides.py): query i of the block over all T keys sees them as query i of the whole
    sequence would, keys 0..i (the first T - start rows of the whole sequence's mask)."""
    T = np.shape(x)[-2]
    keys, values = project(x, w_key), project(x, w_value)
    scores = transposed_matmul(project(x[..., start:, :], w_query), keys)
    return blend(_masked_softmax(scale(scores, keys.shape[-1]), _future(T, window)[: T - start]), values)


def cache_flag(x, w_query, w_key, w_value, start):
    """What an attention op given keys 0..start-1 as its KV cache and its causal flag must compute: decoding's."""
    return decode_attention(x, w_query, w_key, w_value, start)["context"]


def dropout(weights, p, seed):
    (weights,) = _f64(weights)
    keep = np.random.default_rng(seed).random(weights.shape) >= p
    return {"dropout_eval": weights, "dropout_train": np.where(keep, weights / (1 - p), 0.0)}


def multi_head_attention(x, w_query, w_key, w_value, w_out, num_heads, causal):
    """Heads are slices of d_out: head n uses columns n*H:(n+1)*H of each weight, H = d_out / N."""
    heads = grouped_attention(x, w_query, w_key, w_value, num_heads, num_heads, causal)  # (B, N, T, H)
    merged = np.concatenate([heads[..., n, :, :] for n in range(num_heads)], axis=-1)  # (B, T, N*H)
    (w_out,) = _f64(w_out)
    return {"heads": heads, "context": mm(merged, w_out)}


def fused_attention(x, w_query, w_key, w_value, num_heads, causal):
    """What a framework's fused kernel must compute: the heads of multi_head_attention."""
    return grouped_attention(x, w_query, w_key, w_value, num_heads, num_heads, causal)


@remembered(_remembering, bounds.overflows)
def grouped_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    """Grouped-query attention: head n of N uses columns n*H:(n+1)*H of W_query and K/V head n // (N / num_kv_heads)
    (each K/V head repeated N / num_kv_heads times in place: repeat-interleave, as torch's repeat_interleave and Llama's
    repeat_kv). num_kv_heads = 1 is multi-query attention. A head's columns of the whole projection are the numbers
    projecting that head alone would give: each output column is computed from its own weight column only
    (deterministic.matmul included)."""
    x, w_query, w_key, w_value = _f64(x, w_query, w_key, w_value)
    H = w_query.shape[-1] // num_heads
    group = num_heads // num_kv_heads
    queries, keys, values = project(x, w_query), project(x, w_key), project(x, w_value)  # (B, T, N*H), (B, S, K*H) x2
    hidden = _future(x.shape[-2]) if causal else None  # as causal_attention
    heads = []
    for n in range(num_heads):
        kv = n // group
        q, k, v = (
            queries[..., n * H : (n + 1) * H],
            keys[..., kv * H : (kv + 1) * H],
            values[..., kv * H : (kv + 1) * H],
        )
        heads.append(
            blend(softmax(scale(transposed_matmul(q, k), H)), v) if hidden is None else _masked_head(q, k, v, hidden)[1]
        )
    return np.stack(heads, axis=-3)  # (B, N, T, H)


def grouped_fused_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    return grouped_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal)


def packed_fused_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    heads = grouped_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal)
    return np.concatenate([heads[..., n, :, :] for n in range(num_heads)], axis=-1)


def key_padding_flag(x, w_query, w_key, w_value, padding):
    """Each row's real keys counted: the padded ones hidden from every query, masked_attention's."""
    padding = np.asarray(padding, dtype=bool)
    mask = np.broadcast_to(padding[..., None, :], padding.shape[:-1] + (np.shape(x)[-2], padding.shape[-1]))
    return masked_attention(x, w_query, w_key, w_value, mask)["context"]
