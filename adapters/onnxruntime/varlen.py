"""ONNX Runtime: packed documents (conventions.packed_documents) as a padding-free run feeds a graph: position_ids
restarting in each document (transformers' DataCollatorWithFlattening) give the cos and sin caches, turned by the
package's rotate_half graph (ONNX's RotaryEmbedding has no float64), and the document mask is built in the graph from
each token's document (Equal, then Trilu for causal). ONNX has no varlen route, so the Attention operator takes that
mask as its boolean attn_mask, on the packed row and on the documents padded into a batch. Not opset 24's
nonpad_kv_seqlen with is_causal for the padded batch: its causal diagonal sits at the row's last real key, the
external cache's bottom-right (the specification's errata, onnx 1.23), hiding a right-padded document's first queries
(zeros, measured, onnxruntime 1.31.1's float32 kernel; its float64 kernel still aligns top-left). varlen_unrotated_flag
runs the same graphs without the caches."""

import numpy as np

from .cross import _I64
from .logits import _merged
from .rotary import _caches, _turned
from .shared import _run


def _documents(cu_seqlens):
    """Each token's document and its position in it."""
    offsets = np.asarray(cu_seqlens, dtype=np.int64)
    document = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    return document, np.arange(offsets[-1]) - offsets[document]


def _varlen(g, ranks, num_heads, H, causal, fused):
    query, key, value = (g.heads(g("MatMul", "x", w), num_heads, 3) for w in ("w_query", "w_key", "w_value"))
    if "cos" in ranks:  # varlen_unrotated_flag's documents come without the caches
        query, key = (_turned(g, t, "rotate_half", H, "cos", "sin") for t in (query, key))
    # [B, T] documents to [B, 1, T, T], True = may attend (ONNX's polarity): the same document, (causal) not after
    attend = g("Equal", *(g("Unsqueeze", "document", g.const([axis], _I64)) for axis in (-1, -2)))
    attend = g("Unsqueeze", g("Trilu", attend, upper=0) if causal else attend, g.const([1], _I64))
    if fused:
        return {"context": _merged(g, g("Attention", query, key, value, attend), 3)}
    weights = g.scaled_softmax(g("MatMul", query, g.t(key, 4)), key, g("Not", attend))
    return {"queries": query, "weights": weights, "context": _merged(g, g("MatMul", weights, value), 3)}


def _run_varlen(x, w_query, w_key, w_value, num_heads, positions, document, causal, fused, rotate=True):
    H = np.shape(w_query)[-1] // num_heads
    arrays = {"x": x, "w_query": w_query, "w_key": w_key, "w_value": w_value}
    if rotate:
        cos, sin = _caches(positions, H, 10000.0, "none", 1.0, np.asarray(x).dtype)
        arrays |= {"cos": cos, "sin": sin}
    return _run(_varlen, int(num_heads), int(H), bool(causal), fused, **arrays, document=document)


def varlen_attention(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    document, positions = _documents(cu_seqlens)
    return _run_varlen(x, w_query, w_key, w_value, num_heads, positions, document[None], causal, False)


def _padded_batch(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal, rotate):
    """The documents as a batch [n, longest, D] padded at the end, positions 0.. in every row, the padding a document
    of its own (its keys hidden from the real queries); the real rows back end to end."""
    lengths = np.diff(cu_seqlens)
    longest = int(lengths.max())
    rows = np.split(np.asarray(x)[0], np.asarray(cu_seqlens)[1:-1])
    batch = np.stack([np.pad(r, ((0, longest - len(r)), (0, 0))) for r in rows])
    padding = (np.arange(longest)[None] >= lengths[:, None]).astype(np.int64)
    context = _run_varlen(batch, w_query, w_key, w_value, num_heads, np.arange(longest), padding, causal, True, rotate)
    return np.concatenate([c[:n] for c, n in zip(context["context"], lengths)])[None]


def _flags(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal, rotate):
    document, positions = _documents(cu_seqlens)
    weights = (w_query, w_key, w_value)
    packed = _run_varlen(x, *weights, num_heads, positions, document[None], causal, True, rotate)["context"]
    return {"packed": packed, "padded": _padded_batch(x, *weights, num_heads, cu_seqlens, causal, rotate)}


def varlen_flag(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    return _flags(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal, True)


def varlen_unrotated_flag(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    return _flags(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal, False)
