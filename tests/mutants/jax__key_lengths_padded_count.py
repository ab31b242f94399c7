"""key_value_seq_lengths given the count of padded keys instead of real ones: the mask's sum, not its complement's."""

import jax
import jax.numpy as jnp

from attention_conformance.adapters.jax import *
from attention_conformance.adapters.jax.shared import _compiled, _split_last

EXPECTED = "caught"
MUST_FAIL = ("key_padding_flag", "key_padding_flag_one_key")


@_compiled(eager_float16=True)
def key_padding_flag(x, w_query, w_key, w_value, padding):
    x = jnp.asarray(x)
    q, k, v = (_split_last(x @ jnp.asarray(w), 1, w.shape[-1]) for w in (w_query, w_key, w_value))
    lengths = jnp.sum(jnp.asarray(padding), axis=-1, dtype=jnp.int32)  # the bug: the padded keys counted
    return jax.nn.dot_product_attention(q, k, v, key_value_seq_lengths=lengths)[..., 0, :]
