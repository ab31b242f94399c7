"""JAX: parameters are a pytree, modules are pure functions of it.

v2 is a Dense-style params dict {"kernel": [d_in, d_out]}, written out rather than taken from
flax: flax.nnx.Linear would add a dependency to do one matrix multiply, and the layout
difference this suite tests (nn.Linear's [d_out, d_in] against [d_in, d_out]) is plainer here.

Every computing function is jax.jit-compiled, as JAX code is meant to run: one XLA compilation per
function, shapes and dtype, where op-by-op dispatch compiles every primitive for every new shape
and dtype (899 compilations over the spec, most of its run time, measured).
"""

import functools

import jax

from attention_conformance import cache

from .bands import *
from .chunks import *
from .cross import *
from .documents import *
from .heads import *
from .layers import *
from .logits import *
from .norms import *
from .rope_scaling import *
from .rotary import *
from .varlen import *

# XLA executables kept in the suite's cache (attention_conformance.cache), so a rerun loads what an earlier
# run compiled; a user's own JAX_COMPILATION_CACHE_DIR wins. Not numeric: pin_numerics does not record it.
if cache.directory() is not None and not jax.config.jax_compilation_cache_dir:
    jax.config.update("jax_compilation_cache_dir", str(cache.directory() / "xla"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)  # the spec's compiles are small and many
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    # By default jax names folders inside the cache for XLA's GPU caches in the compile options, which are part of each
    # entry's key: a cache copied or moved missed every entry (measured, jax 0.10.2 on CPU: 2,389 compiles, 136 s).
    jax.config.update("jax_persistent_cache_enable_xla_caches", "none")


DTYPES = ("float32", "float64", "float16", "bfloat16")

MODES = {
    "compiled": "jax.jit: each op traced once per shape, dtype and switch, and compiled whole by XLA",
    "eager": "jax.disable_jit(): the same code op by op, each primitive dispatched on its own",
}


def in_mode(mode, op):
    if mode == "compiled":
        return op

    @functools.wraps(op)
    def call(*args, **kwargs):
        with jax.disable_jit():
            return op(*args, **kwargs)

    return call


NOT_APPLICABLE = {
    "sink_decode_paths": "jax.nn.dot_product_attention takes no sinks (jax 0.10)",
    "cache_flag": (
        "jax.nn.dot_product_attention takes no KV cache; a cache is the caller's concatenation "
        "(decode_attention's stepwise)"
    ),
    "softcap_flag": "jax.nn.dot_product_attention takes no soft cap (jax 0.10)",
    "fused_sink_attention": "jax.nn.dot_product_attention takes no sinks (jax 0.10)",
    "attention_stages": "jax.nn.dot_product_attention returns its output alone, none of its scores",
    "packed_fused_attention": "jax.nn.dot_product_attention takes heads on their own axis [B, T, N, H], no counts",
    "fused_rotary": "JAX has no RoPE kernel (Flax's and Gemma's are written from jax.numpy, rotary_embedding's)",
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


def attention_layer(x, w_query, w_key, w_value):
    raise NotImplementedError(NOT_APPLICABLE["attention_layer"])
