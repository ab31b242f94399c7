"""JAX: packed documents (conventions.packed_documents) as a padding-free run writes them: positions restarting in
each document, the document mask built from cu_seqlens, and jax.nn.dot_product_attention on the packed row and on the
documents padded into a batch. jax 0.10.2's dot_product_attention takes no segment ids (only its private cuDNN path,
GPU-only, takes offsets of packed segments), so on the packed row the document mask stands in for them, is_causal on
top; the padded batch goes through its own padding route, query_seq_lengths and key_value_seq_lengths.
cu_seqlens is a compile-time constant (a tuple): the padded batch's shape is its longest document."""

import jax
import jax.numpy as jnp

from .rotary import _rotate
from .shared import _compiled, _masked_weights, _split_heads


def _documents(cu_seqlens):
    """Each token's document and its position in it."""
    offsets, T = jnp.asarray(cu_seqlens), cu_seqlens[-1]
    document = jnp.repeat(jnp.arange(len(cu_seqlens) - 1), jnp.diff(offsets), total_repeat_length=T)
    return document, jnp.arange(T) - offsets[document]


def _rotated_heads(x, w_query, w_key, w_value, num_heads, cu_seqlens, rotate=True):
    """[1, N, T, H] queries and keys rotated at their positions in their documents (as projected if not `rotate`),
    and values."""
    x = jnp.asarray(x)
    H = w_query.shape[-1] // num_heads
    queries, keys, values = (_split_heads(x @ jnp.asarray(w), num_heads, H) for w in (w_query, w_key, w_value))
    if not rotate:
        return queries, keys, values
    _, positions = _documents(cu_seqlens)
    return _rotate(queries, positions, "rotate_half", H), _rotate(keys, positions, "rotate_half", H), values


def _same_document(cu_seqlens):
    document, _ = _documents(cu_seqlens)
    return document[:, None] == document[None, :]


def _merged(heads):  # [.., T, N, H] -> [.., T, N*H]
    return heads.reshape(*heads.shape[:-2], -1)


@_compiled("num_heads", "cu_seqlens", "causal")
def _varlen_attention(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    queries, keys, values = _rotated_heads(x, w_query, w_key, w_value, num_heads, cu_seqlens)
    hidden = ~_same_document(cu_seqlens)
    if causal:
        hidden = hidden | jnp.triu(jnp.ones_like(hidden), k=1)
    weights = _masked_weights(queries @ jnp.swapaxes(keys, -1, -2), keys, hidden)
    return {"queries": queries, "weights": weights, "context": _merged(jnp.swapaxes(weights @ values, -3, -2))}


def _padded(queries, keys, values, cu_seqlens, causal):
    """The documents [T, N, H] as a batch [n, longest, N, H], padded at the end; their rows back end to end.
    Right padding keeps is_causal's top-left diagonal each document's own."""
    lengths = [end - start for start, end in zip(cu_seqlens, cu_seqlens[1:])]
    longest = max(lengths)

    def batch(t):
        pieces = jnp.split(t, cu_seqlens[1:-1], axis=0)
        return jnp.stack([jnp.pad(p, ((0, longest - len(p)), (0, 0), (0, 0))) for p in pieces])

    counts = jnp.asarray(lengths, jnp.int32)
    context = jax.nn.dot_product_attention(
        batch(queries),
        batch(keys),
        batch(values),
        is_causal=causal,
        query_seq_lengths=counts,
        key_value_seq_lengths=counts,
    )
    return jnp.concatenate([c[:n] for c, n in zip(context, lengths)])[None]


@_compiled("num_heads", "cu_seqlens", "causal", "rotate", eager_float16=True)
def _varlen_flag(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal, rotate):
    # jax.nn.dot_product_attention takes [B, T, N, H]
    queries, keys, values = (
        jnp.swapaxes(t, -3, -2) for t in _rotated_heads(x, w_query, w_key, w_value, num_heads, cu_seqlens, rotate)
    )
    attend = _same_document(cu_seqlens)[None, None]  # [B, N, T, S] broadcast: True = take part
    packed = jax.nn.dot_product_attention(queries, keys, values, mask=attend, is_causal=causal)
    padded = _padded(queries[0], keys[0], values[0], cu_seqlens, causal)
    return {"packed": _merged(packed), "padded": _merged(padded)}


def varlen_attention(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    return _varlen_attention(x, w_query, w_key, w_value, num_heads, tuple(int(n) for n in cu_seqlens), causal)


def varlen_flag(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    return _varlen_flag(x, w_query, w_key, w_value, num_heads, tuple(int(n) for n in cu_seqlens), causal, True)


def varlen_unrotated_flag(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
    """flash_attn_varlen_func's case: the packed row attended with whatever queries and keys it is given, no RoPE."""
    return _varlen_flag(x, w_query, w_key, w_value, num_heads, tuple(int(n) for n in cu_seqlens), causal, False)
