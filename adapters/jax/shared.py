"""JAX: what the families share: jit with static arguments, the (masked) scaled softmax, causal mask, heads split."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np


def _np(a):
    return np.asarray(a)


def _compiled(*static, eager_float16=False):
    """jax.jit with `static` (sizes, switches, names) as compile-time constants; results as NumPy.
    eager_float16: float16 `x` goes op by op. Under jax.jit with the suite's pinned "highest" matmul precision,
    XLA:CPU refuses dot_product_attention's float32-accumulating float16 dot ("The precision 'F16_F16_F32' is not
    supported by dot_general on CPU", jax 0.10.2, measured); eagerly it runs."""

    def wrap(fn):
        jitted = jax.jit(fn, static_argnames=static)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            eager = eager_float16 and np.asarray(kwargs["x"] if "x" in kwargs else args[0]).dtype == np.float16
            return jax.tree.map(np.asarray, (fn if eager else jitted)(*args, **kwargs))

        return call

    return wrap


def _scaled_softmax(attn_scores, keys):
    return jax.nn.softmax(attn_scores / math.sqrt(keys.shape[-1]), axis=-1)  # a Python float keeps the dtype


def _masked_weights(attn_scores, keys, hidden):
    return _scaled_softmax(jnp.where(hidden, -jnp.inf, attn_scores), keys)  # True = hidden


def _causal_mask(T):
    return jnp.tril(jnp.ones((T, T), dtype=bool)) == 0  # above the diagonal: the future


def _split_last(t, n, head_dim):  # (.., T, n*H) -> (.., T, n, H): jax.nn.dot_product_attention's layout, not torch's
    return t.reshape(*t.shape[:-1], n, head_dim)


def _split_heads(t, n, head_dim):  # (.., T, n*H) -> (.., n, T, H): one (T, H) block per head
    return jnp.swapaxes(_split_last(t, n, head_dim), -3, -2)
