"""ONNX Runtime: past the one head: masks, decoding with a cache, dropout, several heads and grouped heads."""

import numpy as np
from onnx import TensorProto

from .documents import project
from .shared import _attend_one_head, _attention, _batched, _one_head, _run


def masked_attention(x, w_query, w_key, w_value, mask):
    out = _run(_attention, x=x, w_query=w_query, w_key=w_key, w_value=w_value, mask=np.asarray(mask, dtype=bool))
    return {"weights": out["weights"], "context": out["context"]}


def _causal_mask(T_q, T_k):
    # The query at absolute position p = T_k - T_q + i may see keys 0..p; above that diagonal is the future.
    return np.triu(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q + 1)


def causal_attention(x, w_query, w_key, w_value):
    T = np.shape(x)[-2]
    return masked_attention(x, w_query, w_key, w_value, _causal_mask(T, T))


def _fused(g, ranks, num_heads, num_kv_heads, causal):
    """The standard Attention operator on [B, N, T, H] heads; K/V may have fewer heads (grouped)."""
    query = g.heads(g("MatMul", "x", "w_query"), num_heads, ranks["x"])
    key, value = (g.heads(g("MatMul", "x", w), num_kv_heads, ranks["x"]) for w in ("w_key", "w_value"))
    return {"heads": g("Attention", query, key, value, is_causal=int(causal))}


def fused_attention(x, w_query, w_key, w_value, num_heads, causal):
    return grouped_fused_attention(x, w_query, w_key, w_value, num_heads, num_heads, causal)


def grouped_fused_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    heads = _run(_fused, num_heads, num_kv_heads, causal, x=_batched(x), w_query=w_query, w_key=w_key, w_value=w_value)[
        "heads"
    ]
    return heads[0] if np.ndim(x) == 2 else heads


def _grouped(g, ranks, num_heads, num_kv_heads):
    """Heads by Reshape and Transpose; each K/V head repeated in place (_Graph.repeated)."""
    query = g.heads(g("MatMul", "x", "w_query"), num_heads, ranks["x"])

    def repeated(w):
        kv = g.heads(g("MatMul", "x", w), num_kv_heads, ranks["x"])  # (.., K, T, H)
        return g.repeated(kv, num_kv_heads, num_heads // num_kv_heads, query)

    key, value = repeated("w_key"), repeated("w_value")
    weights = g.scaled_softmax(g("MatMul", query, g.t(key, ranks["x"] + 1)), key, "mask")
    return {"heads": g("MatMul", weights, value)}


def grouped_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    T = np.shape(x)[-2]
    hidden = _causal_mask(T, T) if causal else np.zeros((T, T), dtype=bool)
    return _run(_grouped, num_heads, num_kv_heads, x=x, w_query=w_query, w_key=w_key, w_value=w_value, mask=hidden)[
        "heads"
    ]


def mask_conventions(x, w_query, w_key, w_value, mask, api, fill):
    hidden = np.asarray(mask, dtype=bool)
    hidden = hidden[:, None] if hidden.ndim == 3 else hidden  # [B, 1, T, S]: every head
    dtype = np.asarray(x).dtype
    if api == "bool":  # the Attention operator's boolean mask: True = the key takes part, the suite's opposite
        attn_mask = ~hidden
    else:  # a float mask added to the scores
        value = {"neg_inf": -np.inf, "large_negative": -1e9, "dtype_min": np.finfo(dtype).min}[fill]
        attn_mask = np.where(hidden, value, 0).astype(dtype)
    return _attend_one_head(x, *(_one_head(x, w) for w in (w_query, w_key, w_value)), mask=attn_mask)


def _decode_step(g, ranks):
    """One token with a KV cache, as a deployed decoder runs: past keys and values in, the new
    token's appended (Concat), present keys and values out for the next step; no mask, the future
    is not in the cache yet."""
    key = g("Concat", "past_key", g("MatMul", "token", "w_key"), axis=-2)
    value = g("Concat", "past_value", g("MatMul", "token", "w_value"), axis=-2)
    scores = g("MatMul", g("MatMul", "token", "w_query"), g.t(key, ranks["token"]))
    return {"context": g("MatMul", g.scaled_softmax(scores, key), value), "present_key": key, "present_value": value}


def _decode(g, ranks):
    key, value = g("MatMul", "x", "w_key"), g("MatMul", "x", "w_value")
    scores = g("MatMul", g("MatMul", "queries", "w_query"), g.t(key, ranks["x"]))
    return {"context": g("MatMul", g.scaled_softmax(scores, key, "mask"), value)}


def decode_attention(x, w_query, w_key, w_value, start):
    x = np.asarray(x)
    T = x.shape[-2]
    out = _run(
        _decode,
        x=x,
        queries=x[..., start:, :],
        w_query=w_query,
        w_key=w_key,
        w_value=w_value,
        mask=_causal_mask(T - start, T),
    )
    prefix = x[..., :start, :]  # the prompt: its keys and values fill the cache, computed by the runtime too
    past = {"past_key": project(prefix, w_key), "past_value": project(prefix, w_value)}
    steps = []
    for p in range(start, T):
        step = _run(_decode_step, token=x[..., p : p + 1, :], w_query=w_query, w_key=w_key, w_value=w_value, **past)
        past = {"past_key": step["present_key"], "past_value": step["present_value"]}
        steps.append(step["context"])
    return {"context": out["context"], "stepwise": np.concatenate(steps, axis=-2)}


def window_attention(x, w_query, w_key, w_value, window, start):
    """Opset 23 has no sliding window (opset 25's Attention adds one): the band is built here, in NumPy, and
    hides keys through the graph's Where as any mask does."""
    x = np.asarray(x)
    p, j = np.arange(start, x.shape[-2])[:, None], np.arange(x.shape[-2])
    out = _run(
        _windowed,
        x=x,
        queries=x[..., start:, :],
        w_query=w_query,
        w_key=w_key,
        w_value=w_value,
        mask=(j > p) | (j <= p - window),
    )
    return {"weights": out["weights"], "context": out["context"]}


def _windowed(g, ranks):
    key, value = g("MatMul", "x", "w_key"), g("MatMul", "x", "w_value")
    scores = g("MatMul", g("MatMul", "queries", "w_query"), g.t(key, ranks["x"]))
    weights = g.scaled_softmax(scores, key, "mask")
    return {"weights": weights, "context": g("MatMul", weights, value)}


def causal_flag(x, w_query, w_key, w_value, start):
    x = np.asarray(x)
    return _attend_one_head(
        x, _one_head(x[..., start:, :], w_query), _one_head(x, w_key), _one_head(x, w_value), causal=True
    )


def _cached(g, ranks):
    """The Attention operator with a KV cache: past keys and values joined before the present ones."""
    past = ("past_key", "past_value") if "past_key" in ranks else ()
    return {"context": g("Attention", "q", "k", "v", *(("",) + past if past else ()), is_causal=1, outputs=3)[0]}


def cache_flag(x, w_query, w_key, w_value, start):
    x = np.asarray(x)
    present = x[..., start:, :]
    arrays = {"q": _one_head(present, w_query), "k": _one_head(present, w_key), "v": _one_head(present, w_value)}
    if start:  # keys 0..start-1 as the cache
        arrays |= {"past_key": _one_head(x[..., :start, :], w_key), "past_value": _one_head(x[..., :start, :], w_value)}
    context = _run(_cached, **arrays)["context"]
    return context[:, 0] if x.ndim == 3 else context[0, 0]


def _dropout(g, ranks, p, seed):
    ratio, training = g.const(p), g.const(True, TensorProto.BOOL)
    return {
        "dropout_eval": g("Dropout", "weights", ratio, seed=seed),  # training_mode defaults to False
        "dropout_train": g("Dropout", "weights", ratio, training, seed=seed),
    }


def dropout(weights, p, seed):
    return _run(_dropout, p, seed, weights=weights)


def _multi_head(g, ranks, num_heads):
    rank = ranks["x"]
    query, key, value = (g.heads(g("MatMul", "x", w), num_heads, rank) for w in ("w_query", "w_key", "w_value"))
    weights = g.scaled_softmax(g("MatMul", query, g.t(key, rank + 1)), key, "mask")
    heads = g("MatMul", weights, value)  # (.., N, T, H)
    merged = g(
        "Reshape",
        g("Transpose", heads, perm=[*range(rank - 2), rank - 1, rank - 2, rank]),
        g.const([0] * (rank - 1) + [-1], TensorProto.INT64),
    )  # (.., T, N*H)
    return {"heads": heads, "context": g("MatMul", merged, "w_out")}


def multi_head_attention(x, w_query, w_key, w_value, w_out, num_heads, causal):
    T = np.shape(x)[-2]
    hidden = _causal_mask(T, T) if causal else np.zeros((T, T), dtype=bool)
    return _run(_multi_head, num_heads, x=x, w_query=w_query, w_key=w_key, w_value=w_value, w_out=w_out, mask=hidden)


def attention_layer(x, w_query, w_key, w_value):
    """The Attention operator fed the projections (one head): ONNX's own scaled dot-product attention."""
    return _attend_one_head(x, *(_one_head(x, w) for w in (w_query, w_key, w_value)))


def _packed(g, ranks, num_heads, num_kv_heads, causal):
    q, k, v = (g("MatMul", "x", w) for w in ("w_query", "w_key", "w_value"))  # [B, T, N*H]: 3-D, heads counted
    return {"context": g("Attention", q, k, v, is_causal=int(causal), q_num_heads=num_heads, kv_num_heads=num_kv_heads)}


def packed_fused_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    arrays = {"x": x, "w_query": w_query, "w_key": w_key, "w_value": w_value}
    return _run(_packed, num_heads, num_kv_heads, bool(causal), **arrays)["context"]


def _padded(g, ranks):
    return {"context": g("Attention", "q", "k", "v", "", "", "", "lengths")}


_padded.opset = 24  # nonpad_kv_seqlen: the count of real keys of each batch row


def key_padding_flag(x, w_query, w_key, w_value, padding):
    q, k, v = (_one_head(x, w) for w in (w_query, w_key, w_value))
    lengths = np.sum(~np.asarray(padding, dtype=bool), axis=-1).astype(np.int64)  # the padding trails
    return _run(_padded, q=q, k=k, v=v, lengths=lengths)["context"][:, 0]


def _block(g, ranks, num_heads, num_kv_heads, causal):
    """The Attention operator on the heads of `queries`' rows over the heads of x's (fewer K/V heads: grouped)."""
    query = g.heads(g("MatMul", "queries", "w_query"), num_heads, ranks["queries"])
    key, value = (g.heads(g("MatMul", "x", w), num_kv_heads, ranks["x"]) for w in ("w_key", "w_value"))
    return {"heads": g("Attention", query, key, value, *(["mask"] if "mask" in ranks else []), is_causal=int(causal))}


def decode_paths(x, w_query, w_key, w_value, num_heads, num_kv_heads, start):
    x, T = np.asarray(x), np.shape(x)[-2]
    weights = {"w_query": w_query, "w_key": w_key, "w_value": w_value}
    if start:  # a chunk after a cache: the causal mask at the bottom right (True = may attend, ONNX's polarity)
        seen = {"mask": np.tril(np.ones((T - start, T), dtype=bool), start)}
        batched = _run(_block, num_heads, num_kv_heads, False, queries=x[:, start:], x=x, **weights, **seen)
    else:  # prefill: the causal flag
        batched = _run(_block, num_heads, num_kv_heads, True, queries=x, x=x, **weights)
    alone = [
        _run(_block, num_heads, num_kv_heads, False, queries=x[:, p : p + 1], x=x[:, : p + 1], **weights)["heads"]
        for p in range(start, T)
    ]
    return {"batched": batched["heads"], "alone": np.concatenate(alone, axis=-2)}
