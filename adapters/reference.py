"""The oracle: scaled dot-product self-attention in float64 NumPy, line by line after the math.

Shape letters: T query tokens, S key tokens (T == S in self-attention), B batch,
D d_in, H d_out (= d_k). Leading batch axes are optional everywhere.
Golden expected values are computed by this file, so it must stay the plainest possible
statement of the math: no framework, no fused path, no shortcut. Every product, sum and
exponential goes through attention_conformance.deterministic (`mm`, `fsum`, `exp` below), so its
answers are the same bytes on every CPU, BLAS kernel and thread count. Two things are there for
speed alone, each giving the bytes the plain statement gives (tests/run/test_oracle_cache.py): masked
heads computed in blocks of queries (_masked_head), and an answer computed once given again
(attention_conformance.remembered).
"""

import contextlib
import contextvars

import numpy as np

from attention_conformance import bounds, deterministic, ports
from attention_conformance.remembered import remembered

DTYPES = ("float64",)
NOT_APPLICABLE = {
    "float16": "the oracle computes in float64 only",
    "bfloat16": "the oracle computes in float64 only",
}
_round_to = contextvars.ContextVar("round_to", default=None)


@contextlib.contextmanager
def rounding_to(dtype):
    """Round every step's inputs to `dtype`: the plain half-precision baseline for tolerances."""
    token = _round_to.set(dtype)
    try:
        yield
    finally:
        _round_to.reset(token)


def version():
    return f"numpy {np.__version__}"


def _f64(*arrays):
    dtype = _round_to.get()
    if dtype is not None:
        arrays = [np.asarray(a, dtype=np.float64).astype(dtype) for a in arrays]
    return [bounds.stored(a) if isinstance(a, bounds.Bounded) else np.asarray(a, dtype=np.float64) for a in arrays]


exp = deterministic.exp


# Every product and sum goes through these two, and every softmax checks _bounded: given bounds.Bounded
# arrays (tolerance_model.bound), the same steps also carry how far a correct computation in another summation
# order or dtype may land.
def mm(a, b):
    return bounds.matmul(a, b) if _bounded(a, b) else deterministic.matmul(a, b)


def fsum(a, axis=-1, keepdims=False):
    return (bounds.sum if _bounded(a) else deterministic.sum)(a, axis=axis, keepdims=keepdims)


def _bounded(*arrays):
    return any(isinstance(a, bounds.Bounded) for a in arrays)


def _zeros(shape, like):
    """A buffer the steps fill in pieces: Bounded where `like` is, so no piece drops its bound."""
    return bounds.Bounded(np.zeros(shape)) if _bounded(like) else np.zeros(shape)


# --- the mapping-table rows -------------------------------------------------


def create_parameter(d_in, d_out, seed):
    # The conforming draw for `nn.Parameter(torch.rand(d_in, d_out))`: uniform on [0, 1).
    value = np.random.default_rng(seed).random((d_in, d_out))
    return {"parameter": value, "trainable": True}


@remembered(_round_to.get)
def project(x, w):
    x, w = _f64(x, w)
    return mm(x, w)  # (.., T, D) @ (D, H) -> (.., T, H)


def transposed_matmul(q, k):
    q, k = _f64(q, k)
    return mm(q, np.swapaxes(k, -1, -2))  # (.., T, H) @ (.., H, S) -> (.., T, S)


def scale(scores, d_k):
    (scores,) = _f64(scores)
    return scores / np.sqrt(d_k)


def softmax(scores):
    (scores,) = _f64(scores)
    if _bounded(scores):
        return bounds.softmax(scores)
    shifted = scores - scores.max(axis=-1, keepdims=True)  # exp never overflows
    e = exp(shifted)
    return e / fsum(e, axis=-1, keepdims=True)  # normalise over keys, the last axis


def blend(weights, v):
    weights, v = _f64(weights, v)
    return mm(weights, v)  # (.., T, S) @ (.., S, H) -> (.., T, H)


def dot_columns(x, w):
    x, w = _f64(x, w)
    return np.array([mm(x, w[:, j]) for j in range(w.shape[1])])


# --- the whole pipeline ------------------------------------------------------


def attention(x, w_query, w_key, w_value):
    queries = project(x, w_query)  # (.., T, H)
    keys = project(x, w_key)  # (.., S, H)
    values = project(x, w_value)  # (.., S, H)
    attn_scores = transposed_matmul(queries, keys)  # (.., T, S)
    d_k = keys.shape[-1]
    attn_weights = softmax(scale(attn_scores, d_k))  # (.., T, S), rows sum to 1
    context_vec = blend(attn_weights, values)  # (.., T, H)
    return {
        "query": queries,
        "key": keys,
        "value": values,
        "scores": attn_scores,
        "d_k": d_k,
        "weights": attn_weights,
        "context": context_vec,
    }


# --- masks, dropout and heads -------------------------------------------------
# Conventions (spec/attention.yaml says why): query i sees keys 0..i (T == S); a mask is True
# where a key is hidden; a row whose every key is hidden gets zero weights and a zero context.


def _masked_softmax(scaled, hidden, keys=None):
    """`keys`: the row's length where `scaled` holds only its first keys, the rest hidden."""
    if _bounded(scaled):
        return bounds.softmax(scaled, hidden, keys)
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
        if seen.size == 0:
            continue  # every key hidden from these queries: zero weights, zero context
        last = seen[-1] + 1
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


def _future(T, window=None):
    """Key j hidden from query i: the future (j > i), and with a window the keys j <= i - window."""
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
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
    return window_attention(x, w_query, w_key, w_value, window, start)["context"]


def causal_flag(x, w_query, w_key, w_value, start):  # what a causal flag must compute on the block: decoding's
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


def attention_module(
    x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, causal, layer, checkpoint
):
    """A framework's attention layer: the heads convention with a bias on every projection. The oracle holds the weights
    in its own form, so `checkpoint` (the layout they were saved in) changes nothing here; round_trip is those weights
    as one vector. `layer` "mha_averaged" returns the weights averaged over heads, as nn.MultiheadAttention does by
    default."""
    T = np.shape(x)[-2]
    hidden = _future(T) if causal else np.zeros((T, T), dtype=bool)
    weights, context, own = _layer(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, hidden)
    return {
        "context": context,
        "weights": fsum(weights, axis=-3) / num_heads if layer == "mha_averaged" else weights,
        "round_trip": ports.flat(ports.reference_weights(*own)),
    }


def deciding_inputs(op, inputs):
    """The inputs that decide this oracle's answer to `op` (the oracle cache's key): for attention_module, not the
    checkpoint's layout (the weights arrive in the reference form) nor the layer, except that "mha_averaged" averages
    the weights. The GPT-2-shaped layer through GPT-2's block and through the mha layer is then computed once (1.3 s on
    an empty cache)."""
    if op == "attention_module":
        return inputs | {
            "checkpoint": "reference",
            "layer": "mha_averaged" if inputs["layer"] == "mha_averaged" else "mha",
        }
    return inputs


def layer_mask(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, mask):
    """The layer of attention_module with a mask (True = hidden, [B, T, S]) on every head."""
    hidden = np.asarray(mask, dtype=bool)
    return _layer(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, hidden)[1]


def layer_key_padding(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, padding, causal):
    """The same layer with padded keys (`padding` [B, S], True = padded) hidden from every query, and the future too
    when causal: the [B, T, S] mask a user would otherwise build by hand."""
    hidden = np.asarray(padding, dtype=bool)[..., None, :]  # (B, 1, S): the same keys hidden from every query
    if causal:
        hidden = hidden | _future(np.shape(x)[-2])
    return _layer(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, hidden)[1]


def _layer(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, hidden):
    x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out = _f64(
        x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out
    )
    H = w_query.shape[-1] // num_heads
    queries, keys, values = project(x, w_query) + b_query, project(x, w_key) + b_key, project(x, w_value) + b_value
    T = x.shape[-2]
    weights = _zeros(x.shape[:-2] + (num_heads, T, T), x)  # (B, N, T, S)
    merged = _zeros(x.shape[:-1] + (num_heads * H,), x)  # (B, T, N*H): heads side by side
    for n in range(num_heads):  # head n is columns n*H:(n+1)*H; one (T, T) at a time keeps GPT-2's shape small
        q, k, v = (t[..., n * H : (n + 1) * H] for t in (queries, keys, values))
        weights[..., n, :, :], merged[..., n * H : (n + 1) * H] = _masked_head(q, k, v, hidden)  # one mask, every head
    return weights, mm(merged, w_out) + b_out, (w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)


def layer_defaults(d_in, num_heads, seed):
    """The textbook's layer: SelfAttention_v2 (qkv_bias=False, no dropout), weights per head, and
    nn.Linear's U(-1/sqrt(d_in), 1/sqrt(d_in)) initialisation, the document's v2."""
    w_query = initial_weights(d_in, d_in, "v2", seed)["w_query"].T
    return {"bias": False, "dropout": 0.0, "averaged_weights": False, "w_query": w_query}


@remembered(_round_to.get)
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


def grouped_attention_layer(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    return grouped_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal)


def attention_layer(x, w_query, w_key, w_value):
    """A library's attention layer fed the projections: it should compute scaled attention."""
    return attention(x, w_query, w_key, w_value)["context"]


# --- what the documents say about initialisation and the knobs ---------------------


def draw(distribution, n, seed):
    rng = np.random.default_rng(seed)
    return rng.random(n) if distribution == "uniform" else rng.standard_normal(n)


def initial_weights(d_in, d_out, form, seed):
    """Three independent draws: v1 like torch.rand, v2 like nn.Linear's U(-1/sqrt(d_in), 1/sqrt(d_in))."""
    rng = np.random.default_rng(seed)
    bound = 1 / np.sqrt(d_in)
    w = [rng.random((d_in, d_out)) if form == "v1" else rng.uniform(-bound, bound, (d_out, d_in)) for _ in range(3)]
    return {"w_query": w[0], "w_key": w[1], "w_value": w[2]}


def knobs_removed(x):
    """Part 6 (softmax(x x^T) x), with and without the scale, against part 7 with W = I."""
    (x,) = _f64(x)
    eye = np.eye(x.shape[-1])
    part6 = blend(softmax(transposed_matmul(x, x)), x)
    part6_scaled = blend(softmax(scale(transposed_matmul(x, x), x.shape[-1])), x)
    q = k = v = project(x, eye)
    unscaled = blend(softmax(transposed_matmul(q, k)), v)
    return {
        "part6": part6,
        "part6_scaled": part6_scaled,
        "part7_identity": attention(x, eye, eye, eye)["context"],
        "part7_identity_unscaled": unscaled,
    }


# --- module forms ------------------------------------------------------------
# The oracle has no modules and no autograd: v1 is the pipeline, v2 is the pipeline
# with nn.Linear's [d_out, d_in] weights transposed back to [d_in, d_out].


def self_attention_v1(x, w_query, w_key, w_value):
    context = attention(x, w_query, w_key, w_value)["context"]
    return {"context": context, "context_no_grad": context}


def self_attention_v2(x, w_query, w_key, w_value):
    w_query, w_key, w_value = (np.swapaxes(w, -1, -2) for w in _f64(w_query, w_key, w_value))
    return attention(x, w_query, w_key, w_value)["context"]


def exercise_3_1(x, w_query, w_key, w_value):
    transposed = (np.swapaxes(w, -1, -2) for w in _f64(w_query, w_key, w_value))
    return {
        "context": self_attention_v1(x, *transposed)["context"],
        "context_v2": self_attention_v2(x, w_query, w_key, w_value),
    }


def parameters(d_in, d_out, form):
    return {"count": 3 * d_in * d_out, "trainable": [True, True, True]}


# --- training: the analytic backward pass, for the loss L = sum(context * g) ------------------


def _backward(x, w_query, w_key, w_value, g):
    """dL/dW_query, dL/dW_key, dL/dW_value, dL/dx, written after the chain rule."""
    x, w_query, w_key, w_value, g = _f64(x, w_query, w_key, w_value, g)
    out = attention(x, w_query, w_key, w_value)
    queries, keys, values, attn_weights = out["query"], out["key"], out["value"], out["weights"]
    d_context = g  # (.., T, H)
    d_weights = mm(d_context, np.swapaxes(values, -1, -2))  # (.., T, S)
    d_values = mm(np.swapaxes(attn_weights, -1, -2), d_context)  # (.., S, H)
    # softmax backward, row by row: dz = a * (da - sum(da * a))
    d_scaled = attn_weights * (d_weights - fsum(d_weights * attn_weights, axis=-1, keepdims=True))
    d_scores = d_scaled / np.sqrt(keys.shape[-1])
    d_queries = mm(d_scores, keys)  # (.., T, H)
    d_keys = mm(np.swapaxes(d_scores, -1, -2), queries)  # (.., S, H)

    def d_weight(d_proj):  # x^T @ d_proj, summed over every leading (batch, token) axis: (D, H)
        return mm(x.reshape(-1, x.shape[-1]).T, d_proj.reshape(-1, d_proj.shape[-1]))

    d_x = mm(d_queries, w_query.T) + mm(d_keys, w_key.T) + mm(d_values, w_value.T)  # (.., T, D)
    return d_weight(d_queries), d_weight(d_keys), d_weight(d_values), d_x


def gradients(x, w_query, w_key, w_value, g, form):
    if form == "v2":  # nn.Linear layout in, gradients back in the same layout
        w_query, w_key, w_value = (np.swapaxes(w, -1, -2) for w in _f64(w_query, w_key, w_value))
    d_wq, d_wk, d_wv, d_x = _backward(x, w_query, w_key, w_value, g)
    if form == "v2":
        d_wq, d_wk, d_wv = d_wq.T, d_wk.T, d_wv.T
    return {"grad_w_query": d_wq, "grad_w_key": d_wk, "grad_w_value": d_wv, "grad_x": d_x}


def sgd_step(x, w_query, w_key, w_value, g, lr):
    d_wq, d_wk, d_wv, _ = _backward(x, w_query, w_key, w_value, g)
    w_query, w_key, w_value = _f64(w_query, w_key, w_value)
    return {"w_query": w_query - lr * d_wq, "w_key": w_key - lr * d_wk, "w_value": w_value - lr * d_wv}
