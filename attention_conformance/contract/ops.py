"""The adapter contract's op table: what each op takes and returns, its choices and its forms.

An adapter is a module exposing every op below with exactly these parameter names, NumPy arrays
in and out, and its dtypes as DTYPES (dtypes.py); registry.py finds, imports and checks one.
"""

from attention_conformance import ports

# op -> (parameter names, output names). A single output is returned bare, several as a dict.
# The first group mirrors the rows of the PyTorch-to-TF mapping table in 004_616018589080e108.txt;
# then the pipeline, the two module forms, masks (True = hidden), dropout, heads, and training
# (gradients of L = sum(context * g), one SGD step), and the frameworks' own attention layers.
_X_W = ("x", "w_query", "w_key", "w_value")
_BIASES = ("b_query", "b_key", "b_value", "b_out")
_ROPE_SCALING = ("rope_type", "factor", "original_max_positions", "beta_fast", "beta_slow", "truncate")
_QK_NORM = ("num_heads", "norm_weight_q", "norm_weight_k", "eps", "per_head", "causal")
_CROSS = ("x", "memory", "w_query", "w_key", "w_value", "num_heads", "padding")
_T5 = ("num_buckets", "max_distance", "bidirectional")
_VARLEN = _X_W + ("num_heads", "cu_seqlens", "causal")
OPS = {
    "create_parameter": (("d_in", "d_out", "seed"), ("parameter", "trainable")),
    "project": (("x", "w"), ("projection",)),
    "transposed_matmul": (("q", "k"), ("scores",)),
    "scale": (("scores", "d_k"), ("scaled",)),
    "softmax": (("scores",), ("weights",)),
    "blend": (("weights", "v"), ("context",)),
    "dot_columns": (("x", "w"), ("by_hand",)),
    "attention": (_X_W, ("query", "key", "value", "scores", "d_k", "weights", "context")),
    "self_attention_v1": (_X_W, ("context", "context_no_grad")),
    "self_attention_v2": (_X_W, ("context",)),
    "exercise_3_1": (_X_W, ("context", "context_v2")),
    "parameters": (("d_in", "d_out", "form"), ("count", "trainable")),
    "causal_attention": (_X_W, ("weights", "context")),
    "masked_attention": (_X_W + ("mask",), ("weights", "context")),
    "dropout": (("weights", "p", "seed"), ("dropout_eval", "dropout_train")),
    "multi_head_attention": (_X_W + ("w_out", "num_heads", "causal"), ("heads", "context")),
    "fused_attention": (_X_W + ("num_heads", "causal"), ("heads",)),
    "attention_layer": (_X_W, ("context",)),
    "draw": (("distribution", "n", "seed"), ("sample",)),
    "initial_weights": (("d_in", "d_out", "form", "seed"), ("w_query", "w_key", "w_value")),
    "knobs_removed": (("x",), ("part6", "part6_scaled", "part7_identity", "part7_identity_unscaled")),
    "gradients": (_X_W + ("g", "form"), ("grad_w_query", "grad_w_key", "grad_w_value", "grad_x")),
    "sgd_step": (_X_W + ("g", "lr"), ("w_query", "w_key", "w_value")),
    # The framework's attention layer (`layer`: "mha", "mha_averaged", "mha_seq_first" or "gpt2")
    # loaded with weights saved in `checkpoint`'s layout (attention_conformance.ports); round_trip is
    # the layer's own weights read back into the reference form, ports.flat order.
    "attention_module": (
        _X_W + ("w_out",) + _BIASES + ("num_heads", "causal", "layer", "checkpoint"),
        ("context", "weights", "round_trip"),
    ),
    # That layer as its constructor leaves it: bias on the projections, attention dropout, whether the
    # weights it returns are averaged over heads, and its default-initialised W_query (reference form).
    "layer_defaults": (("d_in", "num_heads", "seed"), ("bias", "dropout", "averaged_weights", "w_query")),
    # Decoding: queries start..T-1 over keys 0..T-1, query p seeing keys 0..p. context: the textbook
    # with the offset mask; stepwise: one token at a time with a KV cache. causal_flag: the
    # framework's built-in causal flag on that block, however it aligns.
    "decode_attention": (_X_W + ("start",), ("context", "stepwise")),
    "causal_flag": (_X_W + ("start",), ("context",)),
    # The same block through the framework's attention op given the first `start` keys and values as its KV
    # cache (ONNX Attention's past_key/past_value) and its causal flag: decoding as its cache API runs it.
    "cache_flag": (_X_W + ("start",), ("context",)),
    # Sliding-window attention (Mistral, Gemma 2, gpt-oss): causal, and query p sees only the `window`
    # keys p-window+1..p (its own included; spec conventions.sliding_window), for the queries start..T-1
    # (decoding: the band's diagonal offset as the causal mask's). The textbook path, the band built from
    # the framework's own ops.
    "window_attention": (_X_W + ("window", "start"), ("weights", "context")),
    # The framework's own sliding-window switch on that query block (jax.nn.dot_product_attention's
    # local_window_size), however it aligns the band.
    "window_flag": (_X_W + ("window", "start"), ("context",)),
    # A two-sided window (flash-attention's window_size=(left, right), not causal): query i sees keys i-left..i+right,
    # -1 on a side for no limit there (conventions.two_sided_window). band_attention: the band from the framework's
    # ops; band_flag: its own window switch (jax's local_window_size).
    "band_attention": (_X_W + ("left", "right"), ("weights", "context")),
    "band_flag": (_X_W + ("left", "right"), ("context",)),
    # Padded queries (flash-attention's query_padding_mask; conventions.padded_queries): `padding` [B, T], True = a
    # padding token, hidden as a key from every query (and causal if `causal`); a padding token's own row is ignored,
    # returned as 0. query_padding_attention: from the framework's ops; query_padding_flag: its fused attention (or its
    # own query-length argument), the padding rows then zeroed.
    "query_padding_attention": (_X_W + ("padding", "causal"), ("weights", "context")),
    "query_padding_flag": (_X_W + ("padding", "causal"), ("context",)),
    # Grouped-query attention: w_key and w_value have num_kv_heads heads; query head n uses K/V head
    # n // (num_heads / num_kv_heads) (repeat-interleave). The textbook path, then the fused kernel.
    "grouped_attention": (_X_W + ("num_heads", "num_kv_heads", "causal"), ("heads",)),
    "grouped_fused_attention": (_X_W + ("num_heads", "num_kv_heads", "causal"), ("heads",)),
    # The suite's mask (True = hidden, [B, T, S]) handed to the framework's attention op in that op's
    # own convention: `api` "bool" (its boolean mask, whatever True means there) or "additive" (a
    # float mask added to the scores, `fill` "neg_inf", "large_negative" (-1e9) or "dtype_min").
    "mask_conventions": (_X_W + ("mask", "api", "fill"), ("context",)),
    # The same mask handed to the framework's attention layer (attention_module's, weights in the
    # reference form) in that layer's own convention.
    "layer_mask": (_X_W + ("w_out",) + _BIASES + ("num_heads", "mask"), ("context",)),
    # Padding as that layer takes it: `padding` [B, S], True = a padded key (hidden from every query),
    # through the layer's own key-padding argument, and `causal` through its own causal switch.
    "layer_key_padding": (_X_W + ("w_out",) + _BIASES + ("num_heads", "padding", "causal"), ("context",)),
    # Rotary position embeddings (spec conventions.rotary): x's rows are one head's tokens at positions
    # position, position+1, ..; `pairing` "interleaved" turns dims (2i, 2i+1), "rotate_half" dims (i, i+R/2);
    # dims rotary_dim.. pass unchanged; frequencies theta ** (-2i/R), scaled by `scaling` ("none", "linear" or
    # "llama3", with `factor`). The textbook path from the framework's ops, then its own kernel (fused_rotary).
    "rotary_embedding": (("x", "pairing", "rotary_dim", "theta", "position", "scaling", "factor"), ("rotated",)),
    "fused_rotary": (("x", "pairing", "rotary_dim", "theta", "position", "scaling", "factor"), ("rotated",)),
    # RoPE scaled past the length a model was trained on (conventions.rope_scaling): `rope_type` "ntk" (bloc97's
    # NTK-aware base theta factor^(R/(R-2))), "dynamic" (that base with factor L/L0 - (factor - 1) once the sequence,
    # its last position + 1 = L, passes L0 = original_max_positions) or "yarn" (the frequencies blended between
    # theta^(-2i/R) and it over factor by a ramp from beta_fast to beta_slow rotations over L0, `truncate`d to whole
    # pairs or not; cos and sin times 0.1 ln(factor) + 1). rope_frequencies: the frequencies and that attention factor
    # for a sequence `length` long, so that a port's wrong table is located.
    "scaled_rotary": (("x", "pairing", "rotary_dim", "theta", "position") + _ROPE_SCALING, ("rotated",)),
    "rope_frequencies": (("rotary_dim", "theta") + _ROPE_SCALING + ("length",), ("frequencies", "attention_factor")),
    # Causal attention with each head's queries and keys rotated (theta 10000), the queries start..T-1
    # over all T keys (decoding: the queries' positions offset by the cache); context is the heads
    # concatenated. rotary_port: weights of an interleaved model run as they are, converted to
    # rotate_half (each head's query and key columns permuted) and converted back.
    "rotary_attention": (_X_W + ("num_heads", "pairing", "rotary_dim", "start"), ("context",)),
    "rotary_port": (_X_W + ("num_heads", "rotary_dim", "start"), ("interleaved", "converted", "restored")),
    # Soft-capping (Gemma 2; spec conventions.softcap): the scaled scores capped, cap * tanh(s / cap), before
    # the mask and the softmax; a cap of 0 is none. The textbook path, then the framework's own switch.
    "softcap_attention": (_X_W + ("cap", "causal"), ("weights", "context")),
    "softcap_flag": (_X_W + ("cap", "causal"), ("context",)),
    # Attention sinks (gpt-oss; conventions.sinks): head n's logit sinks[n] joins every row's softmax as a key
    # with no value; `mask` [B, T, S], True = hidden, may hide every key of a row. weights [B, N, T, S] leave the
    # sink's column out; context is the heads concatenated. The textbook path, then the framework's kernel.
    "sink_attention": (_X_W + ("sinks", "num_heads", "mask"), ("weights", "context")),
    "fused_sink_attention": (_X_W + ("sinks", "num_heads", "mask"), ("context",)),
    # ALiBi (Press et al., ICLR 2022; conventions.alibi): head n's slope m_n by BLOOM's rule, the bias m_n * (j - i)
    # added to the scaled scores of query i and key j, causal or not. alibi_slopes: the slopes alone. alibi_attention:
    # the textbook path from the framework's ops; alibi_flag: the bias through its fused attention (an additive mask,
    # a bias argument).
    "alibi_slopes": (("num_heads",), ("slopes",)),
    "alibi_attention": (_X_W + ("num_heads", "causal"), ("weights", "context")),
    "alibi_flag": (_X_W + ("num_heads", "causal"), ("context",)),
    # QK-norm (Qwen3, Gemma 3, OLMo 2; conventions.qk_norm): queries and keys RMS-normed, per head (weights [H]) or
    # over the whole projection (per_head false, weights [N*H], OLMo 2), then rotated (rotate_half, theta 10000) and
    # attended, causal or not. qk_norm_attention: the norm from the framework's ops; qk_norm_flag: its own RMSNorm.
    "qk_norm_attention": (_X_W + _QK_NORM, ("queries", "weights", "context")),
    "qk_norm_flag": (_X_W + _QK_NORM, ("queries", "context")),
    # Cross-attention (an encoder-decoder's; conventions.cross_attention): queries from x [B, T, D], keys and values
    # from the encoder's `memory` [B, S, D] (S may differ from T), `padding` [B, S] True = a padded memory token, hidden
    # from every query; scaled by 1/sqrt(H). cross_attention: the textbook path; cross_attention_flag: the framework's
    # fused attention given the padding as its mask.
    "cross_attention": (_CROSS, ("weights", "context")),
    "cross_attention_flag": (_CROSS, ("context",)),
    # T5's relative position bias (conventions.t5_relative_bias): t5_relative_bias, the bucket [T, S] of key j seen
    # from query i (T5's _relative_position_bucket of j - i); t5_attention, self-attention whose unscaled scores get
    # bias_table[bucket, n] added (bias_table [num_buckets, N], T5's relative_attention_bias), causal or not.
    "t5_relative_bias": (("query_length", "key_length") + _T5, ("buckets",)),
    "t5_attention": (_X_W + ("num_heads", "bias_table") + _T5 + ("causal",), ("weights", "context")),
    # Packed documents (conventions.packed_documents): documents end to end in one row x [1, T, D], `cu_seqlens`
    # [n + 1] their cumulative lengths (0 first, T last: flash-attn's varlen argument); a token attends within its own
    # document only (causally if `causal`), each head rotated (rotate_half, theta 10000) at positions restarting at 0
    # in each document. varlen_attention: the mask built from cu_seqlens, from the framework's ops; varlen_flag: the
    # framework's fused attention twice, `packed` on the row (its varlen route, or the document mask) and `padded` on
    # the documents as a padded batch, their rows put back end to end.
    "varlen_attention": (_VARLEN, ("queries", "weights", "context")),
    "varlen_flag": (_VARLEN, ("packed", "padded")),
    # The same documents unrotated (flash_attn_varlen_func's own arithmetic, whatever rotated q and k before it).
    "varlen_unrotated_flag": (_VARLEN, ("packed", "padded")),
    # A decoder's attention as Mistral, Gemma 2 and gpt-oss put the families together: grouped heads, every query and
    # key head rotated whole (`pairing`, theta 10000), the scaled scores capped (`cap`, 0 = none), a causal window of
    # `window` keys and head n's sink sinks[n] (-inf = none); context is the heads concatenated.
    "decoder_attention": (
        _X_W + ("num_heads", "num_kv_heads", "pairing", "window", "cap", "sinks"),
        ("context",),
    ),
    # Llama 4's attention (conventions.chunked_attention, temperature_tuning, l2_qk_norm). chunked_attention: one head,
    # causal within chunks of `chunk` tokens, `padding` [B, T] the rows' left padding (True = padding, leading; the
    # chunks start at each row's first real token, a padding row is 0), from the framework's ops; chunked_flag: the
    # same through its fused attention given the chunks as a mask. llama4_attention: a Llama 4 layer for the queries
    # start..T-1, grouped heads; a RoPE layer (use_rope) turns each head (interleaved, theta 10000), RMS-norms queries
    # and keys with no weight (`eps`) and attends within chunks (`chunk`, 0 = none); a NoPE layer scales query p by
    # log(floor((p + 1) / floor_scale) + 1) attn_scale + 1 (0 = none) and attends every earlier key.
    "chunked_attention": (_X_W + ("chunk", "padding"), ("weights", "context")),
    "chunked_flag": (_X_W + ("chunk", "padding"), ("context",)),
    "llama4_attention": (
        _X_W + ("num_heads", "num_kv_heads", "use_rope", "chunk", "floor_scale", "attn_scale", "eps", "start"),
        ("queries", "context"),
    ),
    # ONNX's Attention operator past the mapping table (opsets 23-24, as onnx 1.23's specification words them), each
    # through the framework's own fused op. attention_stages: one head's scores at each stage the operator can
    # return (qk_matmul_output_mode 0, 1 and 3): scaled q k^T, then capped (before the causal mask), then the
    # weights. scale_flag: its scale argument in place of 1/sqrt(H). packed_fused_attention: heads packed in the last
    # axis, [B, T, N*H], their counts as arguments (q_num_heads/kv_num_heads); context the same packing.
    # key_padding_flag: `padding` [B, S], True = a padded key, always trailing, given as each row's count of real keys
    # (nonpad_kv_seqlen, key_value_seq_lengths).
    "attention_stages": (_X_W + ("cap", "causal"), ("scaled", "capped", "weights")),
    "scale_flag": (_X_W + ("softmax_scale", "causal"), ("context",)),
    "packed_fused_attention": (_X_W + ("num_heads", "num_kv_heads", "causal"), ("context",)),
    "key_padding_flag": (_X_W + ("padding",), ("context",)),
    # The framework's grouped-query attention layer holding w_query, w_key and w_value as its kernels,
    # no biases and an identity output projection, so that what it returns is the heads.
    "grouped_attention_layer": (_X_W + ("num_heads", "num_kv_heads", "causal"), ("heads",)),
    # Where kernels switch paths (conventions.kernel_paths): the queries start..T-1, query p seeing keys 0..p, through
    # the framework's fused attention given the fewer K/V heads. batched: the block in one call (S = T - start
    # queries, the causal mask at the bottom right, as prefill and chunked prefill run it); alone: each query in a
    # call of its own over its keys 0..p (S = 1, as a decode step runs it). sink_decode_paths: the same with head n's
    # sink sinks[n] through the fused attention's sinks argument.
    "decode_paths": (_X_W + ("num_heads", "num_kv_heads", "start"), ("batched", "alone")),
    "sink_decode_paths": (_X_W + ("num_heads", "num_kv_heads", "sinks", "start"), ("batched", "alone")),
}
LAYERS = ("mha", "mha_averaged", "mha_seq_first", "gpt2")  # attention_module's `layer`
# The words a parameter takes (the loader refuses any other in a spec; NOT_APPLICABLE may name one
# as "param=value").
CHOICES = {
    "form": ("v1", "v2"),
    "distribution": ("uniform", "normal"),
    "layer": LAYERS,
    "checkpoint": ports.LAYOUTS,
    "api": ("bool", "additive"),
    "fill": ("neg_inf", "large_negative", "dtype_min"),
    "pairing": ("interleaved", "rotate_half"),
    "scaling": ("none", "linear", "llama3"),
    "rope_type": ("ntk", "dynamic", "yarn"),
}
# What each parameter is. Tensors: "tokens" [.., T, D]; "square" [.., T, S] (scores, weights); "mask" bool [.., T, S],
# True = hidden; "padding" bool [B, S], True = a padded key; "weight" [D, D] (x @ W layout); "bias" [D]; "sink" [N], one
# logit a head; "gain" a norm's weight, [H] (per head) or [N*H]; "table" a bias per bucket and head [num_buckets, N].
# Scalars: "width" (a size), "heads", "seed", "probability", "count", "rate", "offset" (a token index), "window" (keys
# a query sees), "chunk" (tokens a chunk holds), "floor" (positions a temperature's step takes), "temperature" (its
# slope, 0 = none), "reach" (keys a query sees on one side beyond its own, -1 = all), "rotary" (dims RoPE turns, even),
# "base" (RoPE's theta), "factor" (a frequency scaling's), "position" (a token's position), "cap" (a soft cap, 0 =
# none), "multiplier" (what the scores are multiplied by in place of 1/sqrt(H)), "epsilon" (what a norm adds under its
# root), "buckets" (relative-position buckets), "distance" (where T5's last bucket starts), "offsets" (cumulative
# lengths, int64 [n + 1]), "switch" (true/false), "choice" (one of CHOICES). The `check` command builds its tiny
# inputs from this table, so every parameter of OPS must be here (tests/cases/test_spec.py), never a name the `check`
# command happens to know.
PARAMETERS = {
    "x": "tokens",
    "memory": "tokens",
    "q": "tokens",
    "k": "tokens",
    "v": "tokens",
    "g": "tokens",
    "scores": "square",
    "weights": "square",
    "mask": "mask",
    "padding": "padding",
    "w": "weight",
    "w_query": "weight",
    "w_key": "weight",
    "w_value": "weight",
    "w_out": "weight",
    "b_query": "bias",
    "b_key": "bias",
    "b_value": "bias",
    "b_out": "bias",
    "d_k": "width",
    "d_in": "width",
    "d_out": "width",
    "num_heads": "heads",
    "num_kv_heads": "heads",
    "seed": "seed",
    "p": "probability",
    "n": "count",
    "lr": "rate",
    "start": "offset",
    "window": "window",
    "chunk": "chunk",
    "floor_scale": "floor",
    "attn_scale": "temperature",
    "use_rope": "switch",
    "left": "reach",
    "right": "reach",
    "rotary_dim": "rotary",
    "theta": "base",
    "factor": "factor",
    "position": "position",
    "original_max_positions": "position",
    "length": "position",
    "beta_fast": "factor",
    "beta_slow": "factor",
    "truncate": "switch",
    "cap": "cap",
    "softmax_scale": "multiplier",
    "sinks": "sink",
    "norm_weight_q": "gain",
    "norm_weight_k": "gain",
    "eps": "epsilon",
    "bias_table": "table",
    "query_length": "width",
    "key_length": "width",
    "num_buckets": "buckets",
    "max_distance": "distance",
    "bidirectional": "switch",
    "cu_seqlens": "offsets",
    "causal": "switch",
    "per_head": "switch",
    **{name: "choice" for name in CHOICES},
}
# How each op's token tensors come, as the spec feeds them (tests/cases/test_spec.py checks it case by
# case): "row" (one token, x [D]; one row of scores [S]), "unbatched" ([T, D], scores [T, S]) or
# "batched" ([B, T, D], masks [B, T, S]). An op with two forms must take both. Ops without token
# tensors are not listed.
_BOTH = ("unbatched", "batched")
_PAST_THE_DOCUMENTS = list(OPS)[list(OPS).index("sgd_step") + 1 :]
_TOKENLESS = ("layer_defaults", "rope_frequencies", "alibi_slopes", "t5_relative_bias")
FORMS = {
    "project": ("row", "unbatched"),
    "transposed_matmul": _BOTH,
    "scale": ("unbatched",),
    "softmax": ("row", "unbatched"),
    "blend": ("unbatched",),
    "dot_columns": ("row",),
    "attention": _BOTH,
    "self_attention_v1": _BOTH,
    "self_attention_v2": _BOTH,
    "exercise_3_1": ("unbatched",),
    "causal_attention": _BOTH,
    "masked_attention": ("unbatched",),
    "dropout": ("unbatched",),
    "multi_head_attention": _BOTH,
    "fused_attention": _BOTH,
    "attention_layer": ("unbatched",),
    "knobs_removed": ("unbatched",),
    "gradients": _BOTH,
    "sgd_step": _BOTH,
    # Every op past the documents' takes batched tokens, but those with no tokens at all.
    **{op: ("batched",) for op in _PAST_THE_DOCUMENTS if op not in _TOKENLESS},
}
# Ops an adapter may leave out: its cases are then not applicable, said so in the summary. A new op
# is a contract change for every adapter outside this repository; optional ones do not break them:
# every op past the documents' (the first group above, up to sgd_step) is optional.
OPTIONAL = frozenset(_PAST_THE_DOCUMENTS)
CONTRACT = {"version": ()} | {op: params for op, (params, _) in OPS.items()}  # every function an adapter defines
OUTPUTS = tuple(sorted({out for _, outs in OPS.values() for out in outs}))
