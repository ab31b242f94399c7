"""PyTorch: packed documents (conventions.packed_documents) as a padding-free run writes them: positions restarting in
each document (transformers' DataCollatorWithFlattening), the document mask built from cu_seqlens, and SDPA on the
packed row and on the documents padded into a batch. Nested tensors would be the varlen route, but torch 2.13's CPU
SDPA refuses them with is_causal ("No viable backend", measured), so the mask stands in for it."""

import torch
import torch.nn.functional as F

from .rotary import _rotate
from .shared import _np, _split_heads, _t


# Outside the graph under torch.compile: the documents' sizes are data (repeat_interleave's output length), which
# dynamo would trace around with graph breaks; each graph then takes the documents as a constant input.
@torch.compiler.disable
def _documents(cu_seqlens):
    """Each token's document and its position in it."""
    offsets = torch.as_tensor(cu_seqlens, dtype=torch.int64)
    lengths = offsets.diff()
    document = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
    return document, torch.arange(int(offsets[-1])) - offsets[document]


def _rotated_heads(x, w_query, w_key, w_value, num_heads, cu_seqlens):
    x = _t(x)
    H = w_query.shape[-1] // num_heads
    queries, keys, values = (_split_heads(x @ _t(w), num_heads, H) for w in (w_query, w_key, w_value))
    _, positions = _documents(cu_seqlens)
    return _rotate(queries, positions, "rotate_half", H), _rotate(keys, positions, "rotate_half", H), values


def _attend(cu_seqlens, causal):
    """SDPA's bool mask, True = take part: the same document, and (causal) not after the query."""
    document, _ = _documents(cu_seqlens)
    same = document[:, None] == document[None, :]
    return same & torch.ones_like(same).tril() if causal else same


def varlen_attention(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    queries, keys, values = _rotated_heads(x, w_query, w_key, w_value, num_heads, cu_seqlens)
    attn_scores = queries @ keys.mT / queries.shape[-1] ** 0.5
    attn_scores = torch.where(_attend(cu_seqlens, causal), attn_scores, -torch.inf)
    weights = torch.softmax(attn_scores, dim=-1)
    context = (weights @ values).transpose(-3, -2).flatten(-2)
    return {"queries": _np(queries), "weights": _np(weights), "context": _np(context)}


def _padded(queries, keys, values, cu_seqlens, causal):
    """The documents as a batch [n, N, longest, H], padded at the end, through SDPA; their rows back end to end."""
    lengths = [int(n) for n in torch.as_tensor(cu_seqlens).diff()]
    longest = max(lengths)

    def batch(t):
        pieces = t[0].split(lengths, dim=-2)
        return torch.stack([F.pad(p, (0, 0, 0, longest - p.shape[-2])) for p in pieces])

    j = torch.arange(longest)
    attend = j[None, None, None, :] < torch.tensor(lengths)[:, None, None, None]  # a document's own keys
    if causal:
        attend = attend & (j[None, :] <= j[:, None])  # right padding: the diagonal stays at the top left
    context = F.scaled_dot_product_attention(batch(queries), batch(keys), batch(values), attn_mask=attend)
    return torch.cat([c[:, :n] for c, n in zip(context, lengths)], dim=-2)[None]


def varlen_flag(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    queries, keys, values = _rotated_heads(x, w_query, w_key, w_value, num_heads, cu_seqlens)
    packed = F.scaled_dot_product_attention(queries, keys, values, attn_mask=_attend(cu_seqlens, causal))
    padded = _padded(queries, keys, values, cu_seqlens, causal)
    return {"packed": _np(packed.transpose(-3, -2).flatten(-2)), "padded": _np(padded.transpose(-3, -2).flatten(-2))}
