"""A new framework's adapter: `attention-conformance template > my_adapter.py` (or copy this file to
adapters/<framework>.py), then replace each body with your framework's idiom. NumPy arrays in and
out; each function's docstring says what it returns (`attention-conformance docs contract` prints the
whole contract). Check it with `attention-conformance check my_adapter`, then
`attention-conformance run --adapter my_adapter`.
"""

import numpy as np  # noqa: F401 - adapters return NumPy arrays

DTYPES = ("float32",)  # the first is where every case runs; the spec's sweep adds the others
# Why this framework cannot run something (shown as not applicable, never passed), keyed by a dtype, an op or a
# case id; "op/output" for one output ("attention_module/weights"); "param=value" for one value ("layer=mha");
# "*" for every function you delete from this file (a function deleted without it breaks the contract).
NOT_APPLICABLE = {}
# 'case[/output[/dtype]]' ("*" for any text) -> why your result differs, with a link where one exists.
# Run as strict expected failures: an entry that stops failing, or matches nothing, fails the run.
# Wrapping or copying a built-in adapter? Take its over: KNOWN_DIVERGENCES = known_divergences("torch") | {...}
# (from attention_conformance import known_divergences).
KNOWN_DIVERGENCES = {}


def devices():  # optional: where your framework can compute; without it the suite assumes ["cpu"]
    return ["cpu"]


# Optional: set the numeric switches that change your framework's results on some machine (matmul precision, TF32,
# JAX's x64) and return them, {switch: value}; the suite calls it after importing you and records what it returns.
# The built-in torch, TensorFlow and JAX adapters have one: from attention_conformance.adapters.jax import pin_numerics
# def pin_numerics():
#     return {}


def version():
    raise NotImplementedError


def create_parameter(d_in, d_out, seed):
    raise NotImplementedError


def project(x, w):
    raise NotImplementedError


def transposed_matmul(q, k):
    raise NotImplementedError


def scale(scores, d_k):
    raise NotImplementedError


def softmax(scores):
    raise NotImplementedError


def blend(weights, v):
    raise NotImplementedError


def dot_columns(x, w):
    raise NotImplementedError


def attention(x, w_query, w_key, w_value):
    raise NotImplementedError


def self_attention_v1(x, w_query, w_key, w_value):
    raise NotImplementedError


def self_attention_v2(x, w_query, w_key, w_value):
    raise NotImplementedError


def exercise_3_1(x, w_query, w_key, w_value):
    raise NotImplementedError


def parameters(d_in, d_out, form):
    raise NotImplementedError


def causal_attention(x, w_query, w_key, w_value):
    raise NotImplementedError


def masked_attention(x, w_query, w_key, w_value, mask):
    raise NotImplementedError


def dropout(weights, p, seed):
    raise NotImplementedError


def multi_head_attention(x, w_query, w_key, w_value, w_out, num_heads, causal):
    raise NotImplementedError


def fused_attention(x, w_query, w_key, w_value, num_heads, causal):
    raise NotImplementedError


def attention_layer(x, w_query, w_key, w_value):
    raise NotImplementedError


def draw(distribution, n, seed):
    raise NotImplementedError


def initial_weights(d_in, d_out, form, seed):
    raise NotImplementedError


def knobs_removed(x):
    raise NotImplementedError


def gradients(x, w_query, w_key, w_value, g, form):
    raise NotImplementedError


def sgd_step(x, w_query, w_key, w_value, g, lr):
    raise NotImplementedError


# Optional (attention_conformance/contract/ops.py: OPTIONAL): your framework's own attention layer, loaded with a
# checkpoint saved by another framework. Left out, its cases are not applicable. docs/frameworks.md: "Framework layers
# and porting weights"; attention_conformance.ports converts between every layout (NumPy only).
#
# def attention_module(
#     x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, causal, layer, checkpoint
# ):
#     from attention_conformance import ports
#     weights = ports.reference_weights(w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out)
#     state = ports.as_saved_by(checkpoint, weights, "torch", num_heads)  # the layout your layer reads
#     ...  # build the layer, load `state`, run it on x (causal: query i sees keys 0..i)
#     return {
#         "context": ...,
#         "weights": ...,
#         "round_trip": ports.flat(ports.from_layout("torch", read_back, num_heads)),
#     }
#
# Optional: sliding-window attention, the band built from your framework's own ops. Causal, and query p (absolute:
# the queries are x[..., start:, :]) sees only keys p-window+1..p, its own included (spec conventions.sliding_window).
#
# def window_attention(x, w_query, w_key, w_value, window, start):
#     ...  # hide key j from query p when j > p or j <= p - window, then the masked softmax
#     return {"weights": ..., "context": ...}
#
# def window_flag(x, w_query, w_key, w_value, window, start):  # your attention op's own window switch, if it has one
#     return ...  # the context
#
# def cache_flag(x, w_query, w_key, w_value, start):  # your attention op with keys 0..start-1 as its own KV cache
#     return ...  # the context of the queries start..T-1, its causal flag on
#
# Optional: flash-attention's masks. A two-sided window (conventions.two_sided_window), not causal: query i sees keys
# i-left..i+right, -1 no limit on a side. Padded queries (conventions.padded_queries): padding [B, T], True = a padding
# token, hidden as a key from every query, its own row returned as 0 (zero it with a where: a left-padded causal row
# sees no key, and a textbook softmax's 0/0 there is NaN, which a product keeps; torch's CPU SDPA returns 0 there).
#
# def band_attention(x, w_query, w_key, w_value, left, right):
#     return {"weights": ..., "context": ...}
#
# def band_flag(x, w_query, w_key, w_value, left, right):  # your op's own window_size; none: NOT_APPLICABLE
#     return ...  # the context
#
# def query_padding_attention(x, w_query, w_key, w_value, padding, causal):
#     return {"weights": ..., "context": ...}
#
# def query_padding_flag(x, w_query, w_key, w_value, padding, causal):  # your fused attention, the padding's rows 0
#     return ...  # the context
#
# Optional: rotary position embeddings (spec conventions.rotary). x's rows are one head's tokens at positions
# position, position+1, ..; pairs (2i, 2i+1) for pairing "interleaved", (i, i + rotary_dim/2) for "rotate_half"; dims
# rotary_dim.. unchanged; frequency theta ** (-2i / rotary_dim), scaled per `scaling` ("none", "linear", "llama3").
#
# def rotary_embedding(x, pairing, rotary_dim, theta, position, scaling, factor):
#     return ...  # x turned, from your framework's ops
#
# def fused_rotary(x, pairing, rotary_dim, theta, position, scaling, factor):  # your framework's RoPE kernel, if any
#     return ...
#
# def rotary_attention(x, w_query, w_key, w_value, num_heads, pairing, rotary_dim, start):
#     return ...  # causal heads, queries and keys turned (theta 10000), queries start..T-1; heads concatenated
#
# def rotary_port(x, w_query, w_key, w_value, num_heads, rotary_dim, start):
#     ...  # the interleaved model's context as it is, with each head's query/key columns permuted for rotate_half
#     return {"interleaved": ..., "converted": ..., "restored": ...}
#
# Optional: RoPE scaling (spec conventions.rope_scaling): rope_type "ntk" (base theta * factor ** (R / (R - 2))),
# "dynamic" (that base with factor L / L0 - (factor - 1) once L, the last position + 1, passes L0 =
# original_max_positions; theta within it) or "yarn" (HF's _compute_yarn_parameters; cos and sin times
# 0.1 ln(factor) + 1).
#
# def scaled_rotary(x, pairing, rotary_dim, theta, position, rope_type, factor, original_max_positions, beta_fast,
#                   beta_slow, truncate):
#     return ...  # x turned by the scaled frequencies
#
# def rope_frequencies(rotary_dim, theta, rope_type, factor, original_max_positions, beta_fast, beta_slow, truncate,
#                      length):
#     return {"frequencies": ..., "attention_factor": ...}  # [rotary_dim / 2] float32, and a scalar
#
# Optional: soft-capping (spec conventions.softcap): the scaled scores s become cap * tanh(s / cap) before the causal
# mask and the softmax; a cap of 0 is no cap.
#
# def softcap_attention(x, w_query, w_key, w_value, cap, causal):
#     return {"weights": ..., "context": ...}
#
# def softcap_flag(x, w_query, w_key, w_value, cap, causal):  # your attention op's own soft cap, if it has one
#     return ...  # the context
#
# Optional: attention sinks (spec conventions.sinks): head n's logit sinks[n] joins every row's softmax as one more
# key with no value; mask [B, T, S] is True = hidden and may hide every key of a row (then the context is 0).
#
# def sink_attention(x, w_query, w_key, w_value, sinks, num_heads, mask):
#     return {"weights": ..., "context": ...}  # weights [B, N, T, S] without the sink; context the heads concatenated
#
# def fused_sink_attention(x, w_query, w_key, w_value, sinks, num_heads, mask):  # your fused kernel's sinks, if any
#     return ...  # the context
#
# Optional: ALiBi (spec conventions.alibi): head n's slope by BLOOM's rule (alibi_slopes), the bias slope * (j - i)
# for query i and key j added to the scaled scores, then the causal mask (if `causal`) and the softmax.
#
# def alibi_slopes(num_heads):
#     return ...  # [num_heads], float32
#
# def alibi_attention(x, w_query, w_key, w_value, num_heads, causal):
#     return {"weights": ..., "context": ...}  # weights [B, N, T, S]; context the heads concatenated
#
# def alibi_flag(x, w_query, w_key, w_value, num_heads, causal):  # your fused attention given the bias
#     return ...  # the context
#
# Optional: QK-norm (spec conventions.qk_norm): queries and keys RMS-normed, x / sqrt(mean(x^2) + eps) * weight, over
# each head's H dims (per_head; weights [H]) or the whole N*H projection (weights [N*H]), then rotate_half RoPE (theta
# 10000), the scaled scores, the causal mask (if `causal`) and the softmax.
#
# def qk_norm_attention(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
#     return {"queries": ..., "weights": ..., "context": ...}  # queries [B, N, T, H] as they enter the scores
#
# def qk_norm_flag(x, w_query, w_key, w_value, num_heads, norm_weight_q, norm_weight_k, eps, per_head, causal):
#     return {"queries": ..., "context": ...}  # the norm through your framework's own RMSNorm
#
# Optional: where kernels switch paths (spec conventions.kernel_paths): queries start..T-1, query p over keys 0..p,
# grouped heads, through your fused attention twice: the block in one call, and each query alone (S = 1, a decode step).
#
# def decode_paths(x, w_query, w_key, w_value, num_heads, num_kv_heads, start):
#     return {"batched": ..., "alone": ...}  # heads [B, N, T - start, H] each
#
# def sink_decode_paths(x, w_query, w_key, w_value, num_heads, num_kv_heads, sinks, start):  # with its sinks argument
#     return {"batched": ..., "alone": ...}
#
# Optional: cross-attention (spec conventions.cross_attention): queries from x [B, T, D], keys and values from the
# encoder's memory [B, S, D], S apart from T; padding [B, S], True = a padded memory token, hidden from every query.
#
# def cross_attention(x, memory, w_query, w_key, w_value, num_heads, padding):
#     return {"weights": ..., "context": ...}  # weights [B, N, T, S], context [B, T, N*H]
#
# def cross_attention_flag(x, memory, w_query, w_key, w_value, num_heads, padding):
#     return ...  # the context, through your fused attention or attention layer given the padding as its mask
#
# Optional: T5's relative position bias (spec conventions.t5_relative_bias): the bucket of j - i (key minus query),
# and self-attention with unscaled scores plus bias_table[bucket, n] (bias_table [num_buckets, N]).
#
# def t5_relative_bias(query_length, key_length, num_buckets, max_distance, bidirectional):
#     return ...  # int [query_length, key_length]
#
# def t5_attention(x, w_query, w_key, w_value, num_heads, bias_table, num_buckets, max_distance, bidirectional, causal):
#     return {"weights": ..., "context": ...}
#
# Optional: packed documents (spec conventions.packed_documents): x [1, T, D] holds documents end to end, cu_seqlens
# [n + 1] (int64) their cumulative lengths, 0 first, T last; a token sees its own document's keys only, each head
# rotated (rotate_half, theta 10000) at positions restarting at 0 in each document.
#
# def varlen_attention(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
#     return {"queries": ..., "weights": ..., "context": ...}  # [1, N, T, H], [1, N, T, T], [1, T, N*H]
#
# def varlen_flag(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):
#     return {"packed": ..., "padded": ...}  # the context through your fused attention: the row, and a padded batch
#
# def varlen_unrotated_flag(x, w_query, w_key, w_value, num_heads, cu_seqlens, causal):  # the same with no RoPE
#     return {"packed": ..., "padded": ...}
#
# The other optional ops, one stub each; what each returns and checks (contract/meanings.py, docs/contract.md):
#
# attention_stages: ONNX Attention's qk_matmul_output (qk_matmul_output_mode 0, 1 and 3).
# def attention_stages(x, w_query, w_key, w_value, cap, causal):
#     return ...  # `{"scaled", "capped", "weights"}`, one head [B, T, S] each: q k^T scaled by 1/sqrt(H); that
#     # capped, cap * tanh(s / cap) (0 none); neither masked: the causal mask (if `causal`) enters the weights only, the
#     # softmax of the capped scores
#
# causal_flag: records how the flag aligns when T_q < T_k.
# def causal_flag(x, w_query, w_key, w_value, start):
#     return ...  # context of the same query block through the framework's own causal flag
#
# decode_attention: decoding; both must equal rows start.. of the causal pass.
# def decode_attention(x, w_query, w_key, w_value, start):
#     return ...  # `{"context", "stepwise"}`: the queries at positions start..T-1 over all T keys (query p sees keys
#     # 0..p), with the offset mask, and token by token with a KV cache
#
# decoder_attention: a decoder's attention: Mistral (GQA, RoPE, a window), Gemma 2 (and a soft cap), gpt-oss (and
# sinks).
# def decoder_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, pairing, window, cap, sinks):
#     return ...  # context [B, T, N*H]: grouped heads (w_key, w_value num_kv_heads * H wide; query head n over K/V
#     # head n // (N / num_kv_heads)), each query and key head turned whole by `pairing` (theta 10000, positions
#     # 0..T-1), scores scaled by 1/sqrt(H), capped by `cap` (0 none), a causal window of `window` keys (T or more:
#     # plain causal), head n's sink sinks[n] in its softmax (-inf: no sink)
#
# Optional: Llama 4's attention (spec conventions.chunked_attention, temperature_tuning, l2_qk_norm).
# chunked_attention: one head, causal within chunks of `chunk` tokens starting at each row's first real token
# (`padding` [B, T], True = left padding, hidden as keys; a padding row 0).
# def chunked_attention(x, w_query, w_key, w_value, chunk, padding):
#     return {"weights": ..., "context": ...}
#
# def chunked_flag(x, w_query, w_key, w_value, chunk, padding):  # your fused attention given the chunks as its mask
#     return ...  # the context, a padding row 0
#
# llama4_attention: a Llama 4 layer for the queries start..T-1, grouped heads; a RoPE layer (use_rope) turns each head
# (interleaved, theta 10000), RMS-norms queries and keys with no weight (`eps`) and attends within chunks of `chunk`
# (chunk 0: none); a NoPE layer scales query p by log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1 (attn_scale
# 0: no temperature) and attends every earlier key.
# def llama4_attention(
#     x, w_query, w_key, w_value, num_heads, num_kv_heads, use_rope, chunk, floor_scale, attn_scale, eps, start
# ):
#     return {"queries": ..., "context": ...}  # queries [B, N, T - start, H] as they enter the scores
#
# grouped_attention: grouped-query / multi-query attention, the textbook path.
# def grouped_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
#     return ...  # heads (.., N, T, H); w_key, w_value are num_kv_heads heads wide; query head n uses K/V head n //
#     # (N / num_kv_heads)
#
# grouped_attention_layer: the framework's grouped-query attention layer holding these kernels, no biases, an
# identity output projection (so N * H must equal the model width).
# def grouped_attention_layer(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
#     return ...  # heads, as above
#
# grouped_fused_attention: the framework's fused kernel given the fewer K/V heads.
# def grouped_fused_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
#     return ...  # heads, as above
#
# key_padding_flag: the fused attention told each row's count of real keys (ONNX Attention's nonpad_kv_seqlen,
# `jax.nn.dot_product_attention`'s key_value_seq_lengths).
# def key_padding_flag(x, w_query, w_key, w_value, padding):
#     return ...  # context, one head [B, T, H], no causal mask; padding [B, S] True = a padded key, always after the
#     # real ones and at least one real key a row, hidden from every query
#
# layer_defaults: that layer as its constructor leaves it (W_query in the reference form, via `ports.from_layout`).
# def layer_defaults(d_in, num_heads, seed):
#     return ...  # `{"bias": bool, "dropout": float, "averaged_weights": bool, "w_query": [d_in, d_in]}`
#
# layer_key_padding: padding through the layer's own key-padding argument, `causal` through its own causal switch.
# def layer_key_padding(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, padding, causal):
#     return ...  # context; the same layer, padding [B, S] True = a padded key (hidden from every query)
#
# layer_mask: the mask handed to the framework's attention layer in the layer's own convention.
# def layer_mask(x, w_query, w_key, w_value, w_out, b_query, b_key, b_value, b_out, num_heads, mask):
#     return ...  # context; the attention_module layer (weights in the reference form), mask [B, T, S] True = hidden
#     # on every head
#
# mask_conventions: the mask handed to the framework's attention op in that op's own convention: `api` "bool" (its
# boolean mask) or "additive" (`fill` "neg_inf", "large_negative" = -1e9, "dtype_min").
# def mask_conventions(x, w_query, w_key, w_value, mask, api, fill):
#     return ...  # context; mask [B, T, S], True = hidden (the suite's convention)
#
# packed_fused_attention: the fused attention given q, k, v packed [B, T, N*H] with the head counts (ONNX's 3-D
# Attention with q_num_heads/kv_num_heads).
# def packed_fused_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, causal):
#     return ...  # context [B, T, N*H], the heads concatenated as grouped_attention computes them (num_kv_heads K/V
#     # heads)
#
# scale_flag: the fused attention's scale argument (ONNX Attention's `scale`, SDPA's `scale=`).
# def scale_flag(x, w_query, w_key, w_value, softmax_scale, causal):
#     return ...  # context, one head [B, T, H]: softmax(softmax_scale * q k^T, causal if `causal`) v
#
# Optional: modes (docs/modes.md). Without MODES your adapter runs eagerly only, as today. With it, each mode is a
# column of its own: the first is the one `run --adapter my_adapter` runs, another runs with `--mode`.
#
# MODES = {"eager": "each op as written", "compiled": "each op through my framework's compiler"}
#
# def in_mode(mode, op):
#     return op if mode == "eager" else my_framework.compile(op)  # NumPy in, NumPy out, as op itself
