"""JAX: the attention layers checkpoints are loaded into (attention_conformance.ports: every layout).

Flax is imported in the functions, not at the top: it costs 0.6 s and 18 MiB (measured), and only these cases use it.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from attention_conformance import ports

from .shared import _causal_mask, _compiled, _masked_weights, _np, _scaled_softmax, _split_heads


@functools.cache
def _flax_skeleton(embed_dim, num_heads):
    """flax.nnx.MultiHeadAttention (Flax's recommended API at 0.12), built abstractly (nnx.eval_shape:
    no initialiser runs) once per shape: tracing the constructor costs 0.1 s (measured). Its default
    dtype=None computes in the parameters' and inputs' dtype, so one skeleton serves every dtype; its
    other defaults (use_bias=True, dropout_rate=0.0) are what a checkpoint of it holds."""
    from flax import nnx

    layer = nnx.eval_shape(
        lambda: nnx.MultiHeadAttention(
            num_heads, embed_dim, qkv_features=embed_dim, out_features=embed_dim, decode=False, rngs=nnx.Rngs(0)
        )
    )
    return nnx.split(layer, nnx.Param)


def _flax_weights(params):
    """A Flax parameter state as {'query/kernel': array, ...}, ports' Flax layout."""
    from flax import nnx

    return {"/".join(path): _np(v.get_value()) for path, v in nnx.to_flat_state(params)}


def _flax_mha(state, num_heads):
    """The layer's graph and its parameters, every one set from a Flax-layout checkpoint."""
    from flax import nnx

    graphdef, abstract = _flax_skeleton(state["out/bias"].shape[0], num_heads)
    # NumPy arrays, not jnp.asarray: outside jit that is an eager convert per shape and dtype (0.5 s
    # over these cases, measured); as jit arguments they are only transferred.
    params = nnx.from_flat_state(
        [(path, variable.replace(np.asarray(state["/".join(path)]))) for path, variable in nnx.to_flat_state(abstract)]
    )
    return graphdef, params


@functools.partial(jax.jit, static_argnames=("graphdef", "causal"))
def _flax_apply(graphdef, params, x, causal):
    from flax import nnx

    layer = nnx.merge(graphdef, params)
    mask = nnx.make_causal_mask(x[..., 0]) if causal else None  # [B, 1, T, T], True = attend
    context, sown = nnx.capture(layer, nnx.Intermediate)(x, mask=mask, sow_weights=True)
    (attn_weights,) = sown["attention_weights"].get_value()
    return context, attn_weights


@_compiled("num_heads", "causal")
def _gpt2_attention(x, state, num_heads, causal):
    """GPT-2's attention block: one packed c_attn projection (Conv1D: x @ W + b) split into q, k, v."""
    x = jnp.asarray(x)
    E = x.shape[-1]
    head_dim = E // num_heads
    queries, keys, values = (
        _split_heads(t, num_heads, head_dim)
        for t in jnp.split(x @ state["c_attn.weight"] + state["c_attn.bias"], 3, axis=-1)
    )
    scores = queries @ jnp.swapaxes(keys, -1, -2)
    weights = _masked_weights(scores, keys, _causal_mask(x.shape[-2])) if causal else _scaled_softmax(scores, keys)
    merged = jnp.swapaxes(weights @ values, -3, -2).reshape(x.shape)
    return merged @ state["c_proj.weight"] + state["c_proj.bias"], weights


def _layer_outputs(x, state, num_heads, causal, layer):
    """Run `layer` holding `state` (GPT-2's layout for "gpt2", Flax's otherwise) on x."""
    if layer == "gpt2":
        context, attn_weights = _gpt2_attention(x, state, num_heads, causal)
        saved = state  # the arrays the jitted block was given
    elif layer == "mha":
        graphdef, params = _flax_mha(state, num_heads)
        context, attn_weights = _flax_apply(graphdef, params, x, causal)
        saved = _flax_weights(params)
    else:
        raise NotImplementedError(f"layer={layer} is not applicable here: see NOT_APPLICABLE")
    return {
        "context": _np(context),
        "weights": _np(attn_weights),
        "round_trip": ports.flat(ports.from_layout(ports.layer_layout(layer, "flax"), saved, num_heads)),
    }


def attention_module(
    x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, causal, layer, checkpoint
):
    weights = (w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    return _layer_outputs(
        x, ports.layer_state(checkpoint, layer, "flax", num_heads, *weights), num_heads, causal, layer
    )


@functools.partial(jax.jit, static_argnames=("graphdef",))
def _flax_masked(graphdef, params, x, mask):
    from flax import nnx

    return nnx.merge(graphdef, params)(x, mask=~mask[..., None, :, :])  # [B, 1, T, S] for every head, True = attend


def layer_mask(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, mask):
    weights = ports.reference_weights(w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    graphdef, params = _flax_mha(ports.to_layout("flax", weights, num_heads), num_heads)
    return _np(_flax_masked(graphdef, params, x, np.asarray(mask)))


@functools.partial(jax.jit, static_argnames=("graphdef", "causal"))
def _flax_padded(graphdef, params, x, padding, causal):
    from flax import nnx

    # make_attention_mask pairs query and key validity (True = a real token) into [B, 1, T, S]
    mask = nnx.make_attention_mask(jnp.ones(x.shape[:-1], dtype=bool), ~padding, dtype=bool)
    if causal:
        mask = nnx.combine_masks(mask, nnx.make_causal_mask(x[..., 0], dtype=bool), dtype=bool)
    return nnx.merge(graphdef, params)(x, mask=mask)


def layer_key_padding(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, padding, causal):
    weights = ports.reference_weights(w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    graphdef, params = _flax_mha(ports.to_layout("flax", weights, num_heads), num_heads)
    return _np(_flax_padded(graphdef, params, x, np.asarray(padding), causal))


@functools.partial(jax.jit, static_argnums=(0, 1, 2))  # nnx.Rngs takes a concrete seed
def _flax_initialised(d_in, num_heads, seed):
    """The layer's parameters as its constructor draws them: one compiled program, where eager
    initialisers dispatch op by op (0.5 s, measured)."""
    from flax import nnx

    return nnx.state(nnx.MultiHeadAttention(num_heads, d_in, decode=False, rngs=nnx.Rngs(seed)), nnx.Param)


def layer_defaults(d_in, num_heads, seed):
    from flax import nnx

    layer = nnx.eval_shape(lambda: nnx.MultiHeadAttention(num_heads, d_in, decode=False, rngs=nnx.Rngs(seed)))
    state = _flax_weights(_flax_initialised(d_in, num_heads, seed))
    # sow_weights keeps the (B, N, T, S) weights per head; there is no averaging switch.
    return {
        "bias": layer.use_bias,
        "dropout": float(layer.dropout_rate),
        "averaged_weights": False,
        "w_query": ports.from_layout("flax", state, num_heads)["w_query"],
    }
