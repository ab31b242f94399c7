"""TensorFlow: the attention layers checkpoints are loaded into (attention_conformance.ports: every layout)."""

import functools

import keras
import tensorflow as tf

from attention_conformance import ports

from .modes import _compiled_part, _compiles_parts
from .shared import _batched, _causal_mask, _masked_weights, _matmul, _np, _scaled_softmax, _split_heads, _t


@functools.cache
def _keras_gqa(embed_dim, num_heads, num_kv_heads, dtype):
    """keras.layers.GroupQueryAttention without biases, built once per shape and dtype."""
    layer = keras.layers.GroupQueryAttention(
        embed_dim // num_heads, num_heads, num_kv_heads, use_bias=False, dtype=dtype
    )
    layer.build((None, None, embed_dim), (None, None, embed_dim))
    return layer


@_batched
def grouped_attention_layer(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    E, head_dim = x.shape[-1], w_query.shape[1] // num_heads  # the identity below needs N * H = E, as in the spec
    layer = _keras_gqa(E, num_heads, num_kv_heads, w_query.dtype.name)
    # EinsumDense kernels: query [E, N, H], key and value [E, K, H] (head n is columns n*H:(n+1)*H);
    # the output projection [N, H, E] is the identity, so the layer returns the heads side by side.
    kernels = {
        "query/kernel": tf.reshape(w_query, [E, num_heads, head_dim]),
        "key/kernel": tf.reshape(w_key, [E, num_kv_heads, head_dim]),
        "value/kernel": tf.reshape(w_value, [E, num_kv_heads, head_dim]),
        "attention_output/kernel": tf.reshape(tf.eye(E, dtype=w_query.dtype), [num_heads, head_dim, E]),
    }
    for variable in layer.weights:
        variable.assign(kernels[_keras_name(variable)])
    merged = layer(x, x, use_causal_mask=causal)  # [B, T, N * H]
    return _np(_split_heads(merged, num_heads, head_dim))


def attention_layer(x, w_query, w_key, w_value):
    x = _t(x)
    Q, K, V = _matmul(x, _t(w_query)), _matmul(x, _t(w_key)), _matmul(x, _t(w_value))
    # Keras orders the inputs [query, value, key] and, with use_scale=False (the default), does not scale.
    return _np(keras.layers.Attention(dtype=w_query.dtype.name)([Q[tf.newaxis], V[tf.newaxis], K[tf.newaxis]])[0])


@functools.cache
def _keras_layer(embed_dim, num_heads, dtype):
    """keras.layers.MultiHeadAttention, built once per shape and dtype (a build costs ~60 ms, measured);
    its defaults (use_bias=True, dropout=0.0) are what a checkpoint of it holds."""
    layer = keras.layers.MultiHeadAttention(num_heads, key_dim=embed_dim // num_heads, dtype=dtype)
    layer.build((None, None, embed_dim), (None, None, embed_dim))
    return layer


def _keras_name(variable):
    return variable.path.split("/", 1)[1]  # '<layer>/query/kernel' -> 'query/kernel', ports' Keras layout


def _keras_weights(layer):
    return {_keras_name(v): _np(v) for v in layer.weights}


def _keras_mha(state, num_heads, dtype):
    """That layer holding a Keras-layout checkpoint: every weight assigned by its path ('<layer>/query/kernel')."""
    layer = _keras_layer(state["attention_output/bias"].shape[0], num_heads, dtype)
    for variable in layer.weights:
        variable.assign(state[_keras_name(variable)])
    return layer


def _gpt2_attention(x, state, num_heads, causal):
    """GPT-2's attention block: one packed c_attn projection (Conv1D: x @ W + b) split into q, k, v."""
    c_attn_w, c_attn_b, c_proj_w, c_proj_b = (
        _t(state[k]) for k in ("c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias")
    )
    E = x.shape[-1]
    head_dim = E // num_heads
    Q, K, V = (_split_heads(t, num_heads, head_dim) for t in tf.split(_matmul(x, c_attn_w) + c_attn_b, 3, axis=-1))
    scores = tf.linalg.matmul(Q, K, transpose_b=True)
    weights = _masked_weights(scores, K, _causal_mask(x.shape[-2])) if causal else _scaled_softmax(scores, K)
    merged = tf.reshape(tf.transpose(tf.linalg.matmul(weights, V), [0, 2, 1, 3]), x.shape)
    held = {"c_attn.weight": c_attn_w, "c_attn.bias": c_attn_b, "c_proj.weight": c_proj_w, "c_proj.bias": c_proj_b}
    return _matmul(merged, c_proj_w) + c_proj_b, weights, held


def _call(layer, *args, **kwargs):  # a layer's call alone: the part of a layer op the compiled mode compiles
    return layer(*args, **kwargs)


def _layer_outputs(x, state, num_heads, causal, layer):
    """Run `layer` holding `state` (GPT-2's layout for "gpt2", Keras's otherwise) on x."""
    if layer == "gpt2":
        context, attn_weights, held = _compiled_part(_gpt2_attention)(_t(x), state, num_heads, causal)
        saved = {k: _np(v) for k, v in held.items()}
    elif layer == "mha":
        mha = _keras_mha(state, num_heads, x.dtype.name)
        context, attn_weights = _compiled_part(_call)(
            mha, _t(x), _t(x), use_causal_mask=causal, return_attention_scores=True
        )
        saved = _keras_weights(mha)
    else:
        raise NotImplementedError(f"layer={layer} is not applicable here: see NOT_APPLICABLE")
    return {
        "context": _np(context),
        "weights": _np(attn_weights),
        "round_trip": ports.flat(ports.from_layout(ports.layer_layout(layer, "keras"), saved, num_heads)),
    }


@_compiles_parts  # the checkpoint's layouts are ports' NumPy
def attention_module(
    x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, causal, layer, checkpoint
):
    weights = (w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    return _layer_outputs(
        x, ports.layer_state(checkpoint, layer, "keras", num_heads, *weights), num_heads, causal, layer
    )


@_compiles_parts
def layer_mask(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, mask):
    weights = ports.reference_weights(w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    mha = _keras_mha(ports.to_layout("keras", weights, num_heads), num_heads, x.dtype.name)
    # attention_mask [B, T, S]: 1 = attend, the suite's opposite
    return _np(_compiled_part(_call)(mha, _t(x), _t(x), attention_mask=tf.logical_not(_t(mask))))


@_compiles_parts
def layer_key_padding(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, padding, causal):
    weights = ports.reference_weights(w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
    mha = _keras_mha(ports.to_layout("keras", weights, num_heads), num_heads, x.dtype.name)
    # value_mask [B, S]: True = a real token (Keras's masking convention), the suite's opposite
    return _np(_compiled_part(_call)(mha, _t(x), _t(x), value_mask=tf.logical_not(_t(padding)), use_causal_mask=causal))


def _default_layer(d_in, num_heads, seed):
    keras.utils.set_random_seed(seed)
    layer = keras.layers.MultiHeadAttention(num_heads, key_dim=d_in // num_heads)
    layer.build((None, None, d_in), (None, None, d_in))
    return layer.get_config(), {_keras_name(v): v.value for v in layer.weights}


@_compiles_parts
def layer_defaults(d_in, num_heads, seed):
    config, weights = _compiled_part(_default_layer)(d_in, num_heads, seed)  # its initialisers compiled
    w_query = ports.from_layout("keras", {k: _np(v) for k, v in weights.items()}, num_heads)["w_query"]
    # return_attention_scores gives the (B, N, T, S) scores per head; there is no averaging switch.
    return {
        "bias": config["use_bias"],
        "dropout": float(config["dropout"]),
        "averaged_weights": False,
        "w_query": w_query,
    }
