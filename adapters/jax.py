"""JAX: parameters are a pytree, modules are pure functions of it.

v2 is a Dense-style params dict {"kernel": [d_in, d_out]}, written out rather than taken from
flax: flax.nnx.Linear would add a dependency to do one matrix multiply, and the layout
difference this suite tests (nn.Linear's [d_out, d_in] against [d_in, d_out]) is plainer here.

Every computing function is jax.jit-compiled, as JAX code is meant to run: one XLA compilation per
function, shapes and dtype, where op-by-op dispatch compiles every primitive for every new shape
and dtype (899 compilations over the spec, most of its run time, measured).
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from attention_conformance import cache, ports

# XLA executables kept in the suite's cache (attention_conformance.cache), so a rerun loads what an earlier
# run compiled; a user's own JAX_COMPILATION_CACHE_DIR wins. Not numeric: pin_numerics does not record it.
if cache.directory() is not None and not jax.config.jax_compilation_cache_dir:
    jax.config.update("jax_compilation_cache_dir", str(cache.directory() / "xla"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)  # the spec's compiles are small and many
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)

DTYPES = ("float32", "float64", "float16", "bfloat16")
NOT_APPLICABLE = {
    "attention_layer": "keras.layers.Attention's case; JAX has no attention layer of its own",
    "layer_mha_averaged": "flax.nnx.MultiHeadAttention sows per-head weights only (no average over heads)",
    "layer_mha_seq_first": "flax.nnx.MultiHeadAttention is batch-first only ([batch..., length, features])",
    "grouped_attention_layer": (
        "flax.nnx has no grouped-query attention layer (MultiHeadAttention has one K/V head per query head); "
        "grouped heads run through jax.nn.dot_product_attention"
    ),
}


def version():
    return f"jax {jax.__version__}"


def pin_numerics():
    jax.config.update("jax_default_matmul_precision", "highest")
    jax.config.update("jax_enable_x64", True)  # else float64 arrays silently become float32
    return {
        "jax.default_matmul_precision": jax.config.jax_default_matmul_precision,
        "jax.enable_x64": jax.config.jax_enable_x64,
    }


def devices():
    return ["cpu"] + ["gpu"] * any(d.platform == "gpu" for d in jax.devices())


def _np(a):
    return np.asarray(a)


def _compiled(*static):
    """jax.jit with `static` (sizes, switches, names) as compile-time constants; results as NumPy."""

    def wrap(fn):
        jitted = jax.jit(fn, static_argnames=static)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            return jax.tree.map(np.asarray, jitted(*args, **kwargs))

        return call

    return wrap


def _scaled_softmax(attn_scores, keys):
    return jax.nn.softmax(attn_scores / math.sqrt(keys.shape[-1]), axis=-1)  # a Python float keeps the dtype


def _attend(queries, keys, values):
    attn_scores = queries @ jnp.swapaxes(keys, -1, -2)  # (.., T, S); keys.T would reverse every axis of a batch
    return _scaled_softmax(attn_scores, keys) @ values


def self_attention_v1_apply(params, x):
    return _attend(x @ params["W_query"], x @ params["W_key"], x @ params["W_value"])


def self_attention_v2_apply(params, x):
    def dense(p, inputs):
        return inputs @ p["kernel"]

    return _attend(dense(params["W_query"], x), dense(params["W_key"], x), dense(params["W_value"], x))


def _v2_params(w_query, w_key, w_value):
    # Dense kernels are [d_in, d_out]; the golden weights are nn.Linear's [d_out, d_in].
    return {
        name: {"kernel": jnp.asarray(w).T} for name, w in (("W_query", w_query), ("W_key", w_key), ("W_value", w_value))
    }


def _trainable(params, apply, x):
    """JAX has no trainable flag: a leaf is trainable when jax.grad reaches it with a float gradient
    (traced for its dtypes only: jax.eval_shape computes nothing)."""
    grads = jax.eval_shape(jax.grad(lambda p, x: apply(p, x).sum()), params, x)
    return [bool(jnp.issubdtype(g.dtype, jnp.floating)) for g in jax.tree.leaves(grads)]


# --- the mapping-table rows -------------------------------------------------


def create_parameter(d_in, d_out, seed):
    parameter = jax.random.uniform(jax.random.key(seed), (d_in, d_out), dtype=jnp.float32)
    trainable = _trainable({"W": parameter}, lambda p, x: x @ p["W"], jax.ShapeDtypeStruct((1, d_in), jnp.float32))
    return {"parameter": _np(parameter), "trainable": all(trainable)}


@_compiled()
def project(x, w):
    return jnp.asarray(x) @ jnp.asarray(w)


@_compiled()
def transposed_matmul(q, k):
    return jnp.asarray(q) @ jnp.swapaxes(jnp.asarray(k), -1, -2)


@_compiled("d_k")
def scale(scores, d_k):
    return jnp.asarray(scores) / math.sqrt(d_k)


@_compiled()
def softmax(scores):
    return jax.nn.softmax(jnp.asarray(scores), axis=-1)


@_compiled()
def blend(weights, v):
    return jnp.asarray(weights) @ jnp.asarray(v)


@_compiled()
def dot_columns(x, w):
    x, w = jnp.asarray(x), jnp.asarray(w)
    return jnp.stack([jnp.dot(x, w[:, j]) for j in range(w.shape[1])])


# --- the whole pipeline and the module forms ---------------------------------


@_compiled()
def attention(x, w_query, w_key, w_value):
    x = jnp.asarray(x)
    queries = x @ jnp.asarray(w_query)
    keys = x @ jnp.asarray(w_key)
    values = x @ jnp.asarray(w_value)
    attn_scores = queries @ jnp.swapaxes(keys, -1, -2)
    attn_weights = _scaled_softmax(attn_scores, keys)
    context_vec = attn_weights @ values
    outputs = {
        "query": queries,
        "key": keys,
        "value": values,
        "scores": attn_scores,
        "weights": attn_weights,
        "context": context_vec,
    }
    return outputs | {"d_k": keys.shape[-1]}


@_compiled()
def self_attention_v1(x, w_query, w_key, w_value):
    params = {"W_query": jnp.asarray(w_query), "W_key": jnp.asarray(w_key), "W_value": jnp.asarray(w_value)}
    context = self_attention_v1_apply(params, jnp.asarray(x))
    frozen = self_attention_v1_apply(jax.lax.stop_gradient(params), jnp.asarray(x))
    return {"context": context, "context_no_grad": frozen}


@_compiled()
def self_attention_v2(x, w_query, w_key, w_value):
    return self_attention_v2_apply(_v2_params(w_query, w_key, w_value), jnp.asarray(x))


@_compiled()
def exercise_3_1(x, w_query, w_key, w_value):
    v2 = _v2_params(w_query, w_key, w_value)
    v1 = {name: layer["kernel"] for name, layer in v2.items()}  # kernels are already [d_in, d_out]
    x = jnp.asarray(x)
    return {"context": self_attention_v1_apply(v1, x), "context_v2": self_attention_v2_apply(v2, x)}


def parameters(d_in, d_out, form):
    def init():  # the module's parameters as JAX would draw them, traced for shapes and dtypes only
        draws = [jax.random.uniform(k, (d_in, d_out)) for k in jax.random.split(jax.random.key(0), 3)]
        return dict(zip(("W_query", "W_key", "W_value"), draws)) if form == "v1" else _v2_params(*(w.T for w in draws))

    params = jax.eval_shape(init)  # as flax's init does under eval_shape: a pytree of shapes, nothing computed
    apply = self_attention_v1_apply if form == "v1" else self_attention_v2_apply
    return {
        "count": sum(leaf.size for leaf in jax.tree.leaves(params)),
        "trainable": _trainable(params, apply, jax.ShapeDtypeStruct((1, d_in), jnp.float32)),
    }


# --- masks, dropout and heads ---------------------------------------------------


def _masked_weights(attn_scores, keys, hidden):
    return _scaled_softmax(jnp.where(hidden, -jnp.inf, attn_scores), keys)  # True = hidden


def _masked_attention(x, w_query, w_key, w_value, mask):
    x = jnp.asarray(x)
    queries, keys, values = x @ jnp.asarray(w_query), x @ jnp.asarray(w_key), x @ jnp.asarray(w_value)
    attn_weights = _masked_weights(queries @ jnp.swapaxes(keys, -1, -2), keys, jnp.asarray(mask))
    return {"weights": attn_weights, "context": attn_weights @ values}


masked_attention = _compiled()(_masked_attention)


def _mask_conventions(x, w_query, w_key, w_value, mask, api, fill):
    x, hidden = jnp.asarray(x), jnp.asarray(mask)
    # jax.nn.dot_product_attention takes [B, T, N, H] and masks [B, N, T, S]: one head here.
    queries, keys, values = ((x @ jnp.asarray(w))[..., None, :] for w in (w_query, w_key, w_value))
    if api == "bool":  # its boolean mask: True = the key takes part, the suite's opposite
        out = jax.nn.dot_product_attention(queries, keys, values, mask=~hidden[..., None, :, :])
    else:  # its additive `bias`; the fill is data, not a compile-time constant: one program for the three
        bias = jnp.where(hidden, jnp.asarray(fill, x.dtype), jnp.zeros((), x.dtype))[..., None, :, :]
        out = jax.nn.dot_product_attention(queries, keys, values, bias=bias)
    return out[..., 0, :]


_mask_conventions_compiled = _compiled("api")(_mask_conventions)


def mask_conventions(x, w_query, w_key, w_value, mask, api, fill):
    dtype = np.asarray(x).dtype
    value = {"neg_inf": -np.inf, "large_negative": -1e9, "dtype_min": float(jnp.finfo(dtype).min)}[fill]
    if dtype == np.float16:  # eager, as fused_attention: XLA:CPU refuses F16_F16_F32 under jit
        return _np(_mask_conventions(x, w_query, w_key, w_value, mask, api, value))
    return _mask_conventions_compiled(x, w_query, w_key, w_value, mask, api, value)


def _causal_mask(T):
    return jnp.tril(jnp.ones((T, T), dtype=bool)) == 0  # above the diagonal: the future


@_compiled()
def causal_attention(x, w_query, w_key, w_value):
    return _masked_attention(x, w_query, w_key, w_value, _causal_mask(x.shape[-2]))


# --- decoding: queries start..T-1 over a cache of keys 0..T-1 -----------------------------------


def _offset_causal_mask(T_q, T_k):
    # The query at absolute position p = T_k - T_q + i may see keys 0..p: the diagonal moves right.
    return jnp.triu(jnp.ones((T_q, T_k), dtype=bool), k=T_k - T_q + 1)


@_compiled("start")
def decode_attention(x, w_query, w_key, w_value, start):
    x, w_query, w_key, w_value = map(jnp.asarray, (x, w_query, w_key, w_value))
    keys, values = x @ w_key, x @ w_value
    queries = x[..., start:, :] @ w_query
    weights = _masked_weights(
        queries @ jnp.swapaxes(keys, -1, -2), keys, _offset_causal_mask(queries.shape[-2], keys.shape[-2])
    )
    # Token by token, JAX's way: a cache of fixed size written in place (lax.dynamic_update_slice),
    # the positions not yet written hidden by position, so every step is the same program.
    T = x.shape[-2]
    k_cache = jnp.zeros_like(keys).at[..., :start, :].set(keys[..., :start, :])
    v_cache = jnp.zeros_like(values).at[..., :start, :].set(values[..., :start, :])

    def step(p, carry):
        k_cache, v_cache, out = carry
        token = jax.lax.dynamic_slice_in_dim(x, p, 1, axis=-2)
        k_cache = jax.lax.dynamic_update_slice_in_dim(k_cache, token @ w_key, p, axis=-2)
        v_cache = jax.lax.dynamic_update_slice_in_dim(v_cache, token @ w_value, p, axis=-2)
        unwritten = jnp.arange(T) > p
        attended = _masked_weights((token @ w_query) @ jnp.swapaxes(k_cache, -1, -2), k_cache, unwritten) @ v_cache
        return k_cache, v_cache, jax.lax.dynamic_update_slice_in_dim(out, attended, p - start, axis=-2)

    out = jnp.zeros((*x.shape[:-2], T - start, w_value.shape[-1]), x.dtype)
    _, _, stepwise = jax.lax.fori_loop(start, T, step, (k_cache, v_cache, out))
    return {"context": weights @ values, "stepwise": stepwise}


def _causal_flag(x, w_query, w_key, w_value, start):
    x = jnp.asarray(x)
    queries, keys, values = (t @ jnp.asarray(w) for t, w in ((x[..., start:, :], w_query), (x, w_key), (x, w_value)))
    heads = jax.nn.dot_product_attention(
        *(t[..., None, :] for t in (queries, keys, values)), is_causal=True
    )  # [B, T, N=1, H]
    return heads[..., 0, :]


_causal_flag_compiled = _compiled("start")(_causal_flag)


def causal_flag(x, w_query, w_key, w_value, start):
    if np.asarray(x).dtype == np.float16:  # eager, as fused_attention: XLA:CPU refuses F16_F16_F32 under jit
        return _np(_causal_flag(x, w_query, w_key, w_value, start))
    return _causal_flag_compiled(x, w_query, w_key, w_value, start)


@_compiled()
def dropout(weights, p, seed):
    weights = jnp.asarray(weights)
    keep = jax.random.bernoulli(jax.random.key(seed), 1 - p, weights.shape)
    return {"dropout_eval": weights, "dropout_train": jnp.where(keep, weights / (1 - p), 0)}


def _split_last(t, n, head_dim):  # (.., T, n*H) -> (.., T, n, H): jax.nn.dot_product_attention's layout, not torch's
    return t.reshape(*t.shape[:-1], n, head_dim)


def _split_heads(t, n, head_dim):  # (.., T, n*H) -> (.., n, T, H): one (T, H) block per head
    return jnp.swapaxes(_split_last(t, n, head_dim), -3, -2)


@_compiled("num_heads", "causal")
def multi_head_attention(x, w_query, w_key, w_value, w_out, num_heads, causal):
    x = jnp.asarray(x)
    d_out = w_query.shape[1]
    head_dim = d_out // num_heads
    queries, keys, values = (_split_heads(x @ jnp.asarray(w), num_heads, head_dim) for w in (w_query, w_key, w_value))
    scores = queries @ jnp.swapaxes(keys, -1, -2)
    weights = _masked_weights(scores, keys, _causal_mask(x.shape[-2])) if causal else _scaled_softmax(scores, keys)
    heads = weights @ values  # (.., N, T, H)
    merged = jnp.swapaxes(heads, -3, -2).reshape(*x.shape[:-1], d_out)
    return {"heads": heads, "context": merged @ jnp.asarray(w_out)}


# --- what the documents say about initialisation and the knobs ---------------------


@_compiled("distribution", "n")
def draw(distribution, n, seed):
    key = jax.random.key(seed)
    sample = jax.random.uniform if distribution == "uniform" else jax.random.normal
    return sample(key, (n,), dtype=jnp.float32)


@_compiled("d_in", "d_out", "form")
def initial_weights(d_in, d_out, form, seed):
    keys = jax.random.split(jax.random.key(seed), 3)
    if form == "v1":
        params = [jax.random.uniform(k, (d_in, d_out), dtype=jnp.float32) for k in keys]
    else:
        # JAX has no nn.Linear; variance_scaling(1/3, fan_in, uniform) is its init: U(+-1/sqrt(d_in)).
        init = jax.nn.initializers.variance_scaling(1 / 3, "fan_in", "uniform")
        params = [init(k, (d_in, d_out), jnp.float32).T for k in keys]  # kernels, shown as [d_out, d_in]
    return dict(zip(("w_query", "w_key", "w_value"), params))


@_compiled()
def knobs_removed(x):
    x = jnp.asarray(x)
    d = x.shape[-1]
    eye = jnp.eye(d, dtype=x.dtype)

    def attend(q, k, v, scaled):
        scores = q @ jnp.swapaxes(k, -1, -2)
        return jax.nn.softmax(scores / math.sqrt(d) if scaled else scores, axis=-1) @ v

    params = {"W_query": eye, "W_key": eye, "W_value": eye}
    return {
        "part6": attend(x, x, x, False),
        "part6_scaled": attend(x, x, x, True),
        "part7_identity": self_attention_v1_apply(params, x),
        "part7_identity_unscaled": attend(x @ eye, x @ eye, x @ eye, False),
    }


def _fused(x, w_query, w_key, w_value, num_heads, causal):
    x = jnp.asarray(x)
    head_dim = w_query.shape[1] // num_heads
    queries, keys, values = (_split_last(x @ jnp.asarray(w), num_heads, head_dim) for w in (w_query, w_key, w_value))
    heads = jax.nn.dot_product_attention(queries, keys, values, is_causal=causal)  # (.., T, N, H)
    return jnp.swapaxes(heads, -3, -2)


_fused_compiled = _compiled("num_heads", "causal")(_fused)


def fused_attention(x, w_query, w_key, w_value, num_heads, causal):
    # float16 goes op by op: under jax.jit with the suite's pinned "highest" matmul precision, XLA:CPU
    # refuses dot_product_attention's float32-accumulating float16 dot ("The precision 'F16_F16_F32'
    # is not supported by dot_general on CPU", jax 0.10.2, measured); eagerly it runs.
    if np.asarray(x).dtype == np.float16:
        return _np(_fused(x, w_query, w_key, w_value, num_heads, causal))
    return _fused_compiled(x, w_query, w_key, w_value, num_heads, causal)


@_compiled("num_heads", "num_kv_heads", "causal")
def grouped_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    x = jnp.asarray(x)
    head_dim = w_query.shape[1] // num_heads
    group = num_heads // num_kv_heads
    queries = _split_heads(x @ jnp.asarray(w_query), num_heads, head_dim)
    keys, values = (
        jnp.repeat(_split_heads(x @ jnp.asarray(w), num_kv_heads, head_dim), group, axis=-3)  # in place
        for w in (w_key, w_value)
    )
    scores = queries @ jnp.swapaxes(keys, -1, -2)
    weights = _masked_weights(scores, keys, _causal_mask(x.shape[-2])) if causal else _scaled_softmax(scores, keys)
    return weights @ values


def _grouped_fused(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    x = jnp.asarray(x)
    head_dim = w_query.shape[1] // num_heads
    queries, keys, values = (
        _split_last(x @ jnp.asarray(w), n, head_dim)
        for w, n in ((w_query, num_heads), (w_key, num_kv_heads), (w_value, num_kv_heads))
    )
    return jnp.swapaxes(
        jax.nn.dot_product_attention(queries, keys, values, is_causal=causal), -3, -2
    )  # fewer K/V heads allowed


_grouped_fused_compiled = _compiled("num_heads", "num_kv_heads", "causal")(_grouped_fused)


def grouped_fused_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
    if np.asarray(x).dtype == np.float16:  # eager, as fused_attention: XLA:CPU refuses F16_F16_F32 under jit
        return _np(_grouped_fused(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal))
    return _grouped_fused_compiled(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal)


def attention_layer(x, w_query, w_key, w_value):
    raise NotImplementedError(NOT_APPLICABLE["attention_layer"])


# --- the layers checkpoints are loaded into (attention_conformance.ports: every layout) -------
# Flax is imported here, not at the top: it costs 0.6 s and 18 MiB (measured), and only these cases use it.


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
        raise NotImplementedError(NOT_APPLICABLE[f"layer_{layer}"])
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


# --- training ------------------------------------------------------------------


def _loss(apply):
    return lambda params, x, g: jnp.sum(apply(params, x) * g)


@_compiled("form")
def gradients(x, w_query, w_key, w_value, g, form):
    x, g = jnp.asarray(x), jnp.asarray(g)
    if form == "v1":
        params = {"W_query": jnp.asarray(w_query), "W_key": jnp.asarray(w_key), "W_value": jnp.asarray(w_value)}
        grads, grad_x = jax.grad(_loss(self_attention_v1_apply), argnums=(0, 1))(params, x, g)
    else:
        params = _v2_params(w_query, w_key, w_value)
        grads, grad_x = jax.grad(_loss(self_attention_v2_apply), argnums=(0, 1))(params, x, g)
        grads = {name: layer["kernel"].T for name, layer in grads.items()}  # back to nn.Linear's [d_out, d_in]
    return {
        "grad_w_query": grads["W_query"],
        "grad_w_key": grads["W_key"],
        "grad_w_value": grads["W_value"],
        "grad_x": grad_x,
    }


@_compiled()
def sgd_step(x, w_query, w_key, w_value, g, lr):
    params = {"W_query": jnp.asarray(w_query), "W_key": jnp.asarray(w_key), "W_value": jnp.asarray(w_value)}
    grads = jax.grad(_loss(self_attention_v1_apply))(params, jnp.asarray(x), jnp.asarray(g))
    params = jax.tree.map(lambda w, d: w - lr * d, params, grads)  # plain SGD, no optax needed for one step
    return {"w_query": params["W_query"], "w_key": params["W_key"], "w_value": params["W_value"]}
