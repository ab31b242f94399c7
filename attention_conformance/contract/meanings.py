"""The contract's words: for each function an adapter defines, what it returns and which row of the
PyTorch-to-TF mapping table, document line or framework feature it stands for. docs/contract.md's table is
generated from these and ops.py by `attention-conformance publish` (tests/publish/test_docs.py: not stale)."""

# function -> (what it returns, what it is: the mapping-table row, document line or framework feature);
# "**optional**: " is added for the functions in ops.OPTIONAL.
MEANINGS = {
    "version": (
        "a string",
        "",
    ),
    "create_parameter": (
        '`{"parameter": array, "trainable": bool}`',
        "`nn.Parameter(torch.rand(d_in, d_out))`",
    ),
    "project": (
        "`x @ w`",
        "`queries = x @ W_query`",
    ),
    "transposed_matmul": (
        "`q @ k^T` over the last two axes",
        "`queries @ keys.T`",
    ),
    "scale": (
        "`scores / sqrt(d_k)`",
        "`scores / keys.shape[-1] ** 0.5`",
    ),
    "softmax": (
        "softmax over the last axis",
        "`torch.softmax(scores, dim=-1)`",
    ),
    "blend": (
        "`weights @ v`",
        "`attn_weights @ values`",
    ),
    "dot_columns": (
        "one dot product per column of `w`",
        '"the row on the left, dotted with each column on the right"',
    ),
    "attention": (
        '`{"query", "key", "value", "scores", "d_k", "weights", "context"}`',
        "the whole pipeline",
    ),
    "self_attention_v1": (
        '`{"context", "context_no_grad"}`',
        "SelfAttention_v1, weights [d_in, d_out]",
    ),
    "self_attention_v2": (
        "context",
        "SelfAttention_v2, weights in nn.Linear's [d_out, d_in]",
    ),
    "exercise_3_1": (
        '`{"context", "context_v2"}`',
        "v1 loaded with v2's weights transposed",
    ),
    "parameters": (
        '`{"count": int, "trainable": [bool]}`',
        "parameter count of v1 or v2",
    ),
    "causal_attention": (
        '`{"weights", "context"}`; weights [d_in, d_out] as in v1',
        "the mask above the diagonal, -inf before softmax",
    ),
    "masked_attention": (
        '`{"weights", "context"}`; weights [d_in, d_out]; mask [T, T] booleans',
        "a padding mask, True = hidden",
    ),
    "dropout": (
        '`{"dropout_eval", "dropout_train"}`',
        "dropout on the attention weights",
    ),
    "multi_head_attention": (
        (
            '`{"heads": (.., N, T, H), "context"}`; all four weights [d_model, d_model] used as `x @ W`; head n takes '
            "columns n*H:(n+1)*H"
        ),
        "split, attend, merge, project",
    ),
    "draw": (
        'n draws, `"uniform"` or `"normal"`',
        "`torch.rand` / `tf.randomNormal` (errata)",
    ),
    "initial_weights": (
        '`{"w_query", "w_key", "w_value"}`',
        "the module form's own initialisation",
    ),
    "knobs_removed": (
        '`{"part6", "part6_scaled", "part7_identity", "part7_identity_unscaled"}`',
        "part 6 against part 7 with W = I (errata)",
    ),
    "fused_attention": (
        "heads (.., N, T, H); weights [d_model, d_model] as in multi-head, no output projection",
        "the framework's fused kernel, in its own layout",
    ),
    "attention_layer": (
        "context; weights [d_in, d_out]",
        "a library attention layer fed the projections",
    ),
    "gradients": (
        '`{"grad_w_query", "grad_w_key", "grad_w_value", "grad_x"}`',
        "autograd of L = sum(context * g), v1 or v2; weight gradients in the layout the weights came in",
    ),
    "sgd_step": (
        '`{"w_query", "w_key", "w_value"}`',
        "v1's weights after one step of the framework's SGD",
    ),
    "attention_module": (
        (
            '`{"context", "weights", "round_trip"}`; x [B, T, E], weights per head (.., N, T, S) (averaged over '
            'heads for `layer` "mha_averaged"); round_trip is the layer\'s own weights read back with '
            "`ports.from_layout`, then `ports.flat`"
        ),
        (
            'the framework\'s attention layer (`layer` "mha", "mha_averaged", "mha_seq_first", or "gpt2" for GPT-2\'s '
            "packed block), loaded from a checkpoint saved in `checkpoint`'s layout: `ports.as_saved_by(checkpoint, "
            'weights, "<your layout>", num_heads)` (see [framework layers and porting weights](frameworks.md))'
        ),
    ),
    "layer_defaults": (
        '`{"bias": bool, "dropout": float, "averaged_weights": bool, "w_query": [d_in, d_in]}`',
        "that layer as its constructor leaves it (W_query in the reference form, via `ports.from_layout`)",
    ),
    "decode_attention": (
        (
            '`{"context", "stepwise"}`: the queries at positions start..T-1 over all T keys (query p sees keys 0..p), '
            "with the offset mask, and token by token with a KV cache"
        ),
        "decoding; both must equal rows start.. of the causal pass",
    ),
    "window_attention": (
        (
            '`{"weights", "context"}`: the queries at positions start..T-1 over all T keys, query p seeing only keys '
            "p-window+1..p (the band built from the framework's own ops)"
        ),
        "sliding-window attention; a window of W is W keys, the query's own included",
    ),
    "window_flag": (
        "context of the same query block through the framework's own sliding-window switch",
        "records how the switch aligns the band when T_q < T_k",
    ),
    "band_attention": (
        '`{"weights", "context"}`: one head, query i seeing only keys i-left..i+right (-1: no limit on that side), '
        "the band built from the framework's own ops",
        "flash-attention's two-sided window, `window_size=(left, right)`, not causal",
    ),
    "band_flag": (
        "context of the same band through the framework's own window switch (a framework without one declares it not "
        "applicable: a band built by hand is band_attention's)",
        "`jax.nn.dot_product_attention(local_window_size=(left, right))`, flash_attn_func's window_size",
    ),
    "query_padding_attention": (
        '`{"weights", "context"}`: one head over a padded batch, the padding hidden as keys (causal if `causal`) and '
        "the padding's own rows 0, from the framework's own ops",
        "flash-attention's query_padding_mask and key_padding_mask (attention_ref)",
    ),
    "query_padding_flag": (
        "context of the same through the framework's fused attention (or its own query-length argument), the "
        "padding's rows then 0",
        "flash_attn_varlen_func on the unpadded batch and pad_input, SDPA with the key mask, "
        "`jax.nn.dot_product_attention(query_seq_lengths=)`",
    ),
    "rotary_embedding": (
        "x [B, T, H], row t being the token at integer position `position` + t, each pair of its first rotary_dim "
        "dims turned by position x theta^(-2i/rotary_dim) (scaled: `scaling` none, linear or llama3, each with "
        "`factor`; 1.0 when none), the rest unchanged, from the framework's own ops",
        "rotary position embeddings (RoFormer eq. 34): `pairing` interleaved or rotate_half (conventions.rotary)",
    ),
    "fused_rotary": (
        "the same, through the framework's own RoPE kernel",
        "`mx.fast.rope`, ONNX's RotaryEmbedding",
    ),
    "scaled_rotary": (
        "x [B, T, H] turned as by rotary_embedding, at positions `position` + t, with frequencies scaled by "
        "`rope_type` (ntk, dynamic or yarn; `factor`, `original_max_positions`, YaRN's `beta_fast`, `beta_slow`, "
        "`truncate`) and, for yarn, cos and sin times 0.1 ln(factor) + 1",
        "RoPE scaling as long-context models ship it: HF's rope_type dynamic and yarn, bloc97's NTK-aware base "
        "(conventions.rope_scaling)",
    ),
    "rope_frequencies": (
        '`{"frequencies", "attention_factor"}`: the rotary_dim / 2 scaled frequencies and the factor cos and sin '
        "are multiplied by, for a sequence `length` long (its last position + 1)",
        "HF's `_compute_dynamic_ntk_parameters` and `_compute_yarn_parameters` (inv_freq, attention_factor)",
    ),
    "rotary_attention": (
        "context [B, T - start, N*H]: causal heads, each head's queries and keys turned (theta 10000, no scaling) at "
        "their absolute positions, scores scaled by 1/sqrt(H), the queries start..T-1 over all T keys",
        "RoPE in attention, decoding with the positions offset by a cache (conventions.rotary)",
    ),
    "rotary_port": (
        '`{"interleaved", "converted", "restored"}`: the context of an interleaved model as it is, with its query and '
        "key columns permuted for rotate_half, and permuted back",
        "converting a checkpoint between the RoPE layouts (HF's Llama conversion)",
    ),
    "softcap_attention": (
        '`{"weights", "context"}`: one head; the scores scaled by 1/sqrt(H), capped, cap * tanh(s / cap), then '
        "masked (causal) and the softmax; a cap of 0 is none",
        "logit soft-capping (Gemma 2: 50.0 for attention; conventions.softcap)",
    ),
    "softcap_flag": (
        "context through the framework's own soft-capping switch",
        "ONNX's Attention `softcap`",
    ),
    "sink_attention": (
        '`{"weights", "context"}`: sinks [N], head n\'s logit joining every row\'s softmax (scores scaled by '
        "1/sqrt(H)) as a key with no value; weights [B, N, T, S] without the sink, context [B, T, N*H]",
        "attention sinks (gpt-oss's learned per-head logit; conventions.sinks)",
    ),
    "fused_sink_attention": (
        "context through the framework's fused attention with its sinks argument",
        "`mx.fast.scaled_dot_product_attention(sinks=)`",
    ),
    "alibi_slopes": (
        "slopes [N]: head n's ALiBi slope, BLOOM's rule (2^(-8/c))^(n+1) for the c = 2^floor(log2 N) first heads, "
        "then (2^(-4/c))^(1, 3, 5, ..) for the rest",
        "ALiBi's slopes (the paper's geometric sequence, BLOOM's build_alibi_tensor; conventions.alibi)",
    ),
    "alibi_attention": (
        '`{"weights", "context"}`: head n\'s scores scaled by 1/sqrt(H), plus slopes[n] * (j - i) for query i and '
        "key j, then the causal mask (if `causal`) and the softmax; weights [B, N, T, S], context [B, T, N*H]",
        "attention with linear biases (ALiBi: BLOOM, MPT; conventions.alibi)",
    ),
    "alibi_flag": (
        "context, as above, through the framework's fused attention given the bias",
        "SDPA's float `attn_mask`, `jax.nn.dot_product_attention(bias=)`, MLX's additive mask, ONNX Attention's "
        "float attn_mask",
    ),
    "qk_norm_attention": (
        '`{"queries", "weights", "context"}`: queries and keys RMS-normed, x / sqrt(mean(x^2) + eps) * weight, over '
        "each head's H dims (`per_head`, weights [H]) or the whole N*H projection (weights [N*H]), then each head "
        "rotated (rotate_half, theta 10000, positions 0..T-1), scaled by 1/sqrt(H), masked (if `causal`), softmaxed",
        "QK-norm before RoPE (Qwen3 and Gemma 3 per head, OLMo 2 over the projection; conventions.qk_norm)",
    ),
    "qk_norm_flag": (
        '`{"queries", "context"}`, as above, the norm through the framework\'s own RMSNorm',
        "`torch.nn.functional.rms_norm`, `keras.layers.RMSNormalization`, `mx.fast.rms_norm`, ONNX "
        "`RMSNormalization` (opset 23)",
    ),
    "cross_attention": (
        '`{"weights", "context"}`: queries from x [B, T, D], keys and values from `memory` [B, S, D], head n\'s scores '
        "scaled by 1/sqrt(H), the padded memory tokens (`padding` [B, S], True = padded) hidden from every query, the "
        "softmax; weights [B, N, T, S], context [B, T, N*H]",
        "an encoder-decoder's cross-attention (the Transformer's, BART's, Whisper's; conventions.cross_attention)",
    ),
    "cross_attention_flag": (
        "context, as above, through the framework's fused attention, the padding as its mask",
        "SDPA's bool `attn_mask`, `keras.layers.MultiHeadAttention(query, value, key)`, "
        "`jax.nn.dot_product_attention(mask=)`, `mx.fast.scaled_dot_product_attention(mask=)`, ONNX Attention with "
        "q and k/v of different lengths",
    ),
    "t5_relative_bias": (
        "buckets [query_length, key_length], int: T5's `_relative_position_bucket` of j - i (key minus query), half "
        "the buckets for each sign where `bidirectional`, the exact half, then logarithmic up to max_distance",
        "T5's bucketed relative positions (conventions.t5_relative_bias)",
    ),
    "t5_attention": (
        '`{"weights", "context"}`: head n\'s scores q k^T unscaled, plus bias_table[bucket(j - i), n], then the '
        "causal mask (if `causal`) and the softmax; weights [B, N, T, S], context [B, T, N*H]",
        "T5's self-attention with its relative position bias (encoder: bidirectional; decoder: not, and causal)",
    ),
    "varlen_attention": (
        '`{"queries", "weights", "context"}`: x [1, T, D] holds documents end to end, `cu_seqlens` [n + 1] (int64) '
        "their cumulative lengths, 0 first and T last; each head's queries and keys rotated (rotate_half, theta 10000) "
        "at positions restarting at 0 in each document, scaled by 1/sqrt(H), a token seeing its own document's keys "
        "only (and only those up to it if `causal`); queries [1, N, T, H], weights [1, N, T, T], context [1, T, N*H]",
        "packed documents without padding (flash-attn's cu_seqlens, transformers' DataCollatorWithFlattening; "
        "conventions.packed_documents)",
    ),
    "varlen_flag": (
        '`{"packed", "padded"}`: context [1, T, N*H], as above, through the fused attention on the packed row and on '
        "the documents as a padded batch",
        "SDPA with a document mask or nested tensors, `jax.nn.dot_product_attention(query_seq_lengths=, "
        "key_value_seq_lengths=)`, keras' and MLX's fused attention with the mask built from the lengths, ONNX "
        "Attention's attn_mask",
    ),
    "varlen_unrotated_flag": (
        '`{"packed", "padded"}`: as varlen_flag, with no RoPE: the queries and keys as projected',
        "`flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, ..)` on whatever q and k it is given",
    ),
    "decoder_attention": (
        "context [B, T, N*H]: grouped heads (w_key, w_value num_kv_heads * H wide; query head n over K/V head n // (N "
        "/ num_kv_heads)), each query and key head turned whole by `pairing` (theta 10000, positions 0..T-1), scores "
        "scaled by 1/sqrt(H), capped by `cap` (0 none), a causal window of `window` keys (T or more: plain causal), "
        "head n's sink sinks[n] in its softmax (-inf: no sink)",
        "a decoder's attention: Mistral (GQA, RoPE, a window), Gemma 2 (and a soft cap), gpt-oss (and sinks)",
    ),
    "chunked_attention": (
        '`{"weights", "context"}`: one head, causal within chunks of `chunk` tokens starting at each row\'s first real '
        "token (`padding` [B, T], True = left padding, hidden as keys; a padding row 0), from the framework's own ops",
        "Llama 4's chunked attention, transformers' chunked_overlay with left_padding (attention_chunk_size)",
    ),
    "chunked_flag": (
        "context of the same through the framework's fused attention given the chunks as a mask, padding rows 0",
        "SDPA's attn_mask, flex_attention's mask_mod, mlx-lm's ChunkedKVCache mask",
    ),
    "llama4_attention": (
        '`{"queries", "context"}`: a Llama 4 layer for queries start..T-1, grouped heads; RoPE layers (use_rope) turn '
        "each head (interleaved, theta 10000), RMS-norm queries and keys with no weight (`eps`) and attend within "
        "chunks of `chunk` (0: none); NoPE layers scale query p by log(floor((p + 1) / floor_scale) + 1) attn_scale "
        "+ 1 (attn_scale 0: none)",
        "transformers' Llama4TextAttention, mlx-lm's llama4 Attention",
    ),
    "attention_stages": (
        '`{"scaled", "capped", "weights"}`, one head [B, T, S] each: q k^T scaled by 1/sqrt(H); that capped, '
        "cap * tanh(s / cap) (0 none); neither masked: the causal mask (if `causal`) enters the weights only, the "
        "softmax of the capped scores",
        "ONNX Attention's qk_matmul_output (qk_matmul_output_mode 0, 1 and 3)",
    ),
    "scale_flag": (
        "context, one head [B, T, H]: softmax(softmax_scale * q k^T, causal if `causal`) v",
        "the fused attention's scale argument (ONNX Attention's `scale`, SDPA's `scale=`)",
    ),
    "packed_fused_attention": (
        "context [B, T, N*H], the heads concatenated as grouped_attention computes them (num_kv_heads K/V heads)",
        "the fused attention given q, k, v packed [B, T, N*H] with the head counts (ONNX's 3-D Attention with "
        "q_num_heads/kv_num_heads)",
    ),
    "key_padding_flag": (
        "context, one head [B, T, H], no causal mask; padding [B, S] True = a padded key, always after the real ones "
        "and at least one real key a row, hidden from every query",
        "the fused attention told each row's count of real keys (ONNX Attention's nonpad_kv_seqlen, "
        "`jax.nn.dot_product_attention`'s key_value_seq_lengths)",
    ),
    "cache_flag": (
        "context of the same query block through the framework's attention op with keys 0..start-1 as its KV cache "
        "(past keys and values) and its causal flag",
        "ONNX Attention's past_key/past_value with is_causal: decoding as a cache API runs it",
    ),
    "causal_flag": (
        "context, one head (.., T - start, H), of the same query block through the framework's own causal flag",
        "records how the flag aligns when T_q < T_k",
    ),
    "grouped_attention": (
        (
            "heads (.., N, T, H); w_key, w_value are num_kv_heads heads wide; query head n uses K/V head n // (N / "
            "num_kv_heads)"
        ),
        "grouped-query / multi-query attention, the textbook path",
    ),
    "grouped_fused_attention": (
        "heads, as above",
        "the framework's fused kernel given the fewer K/V heads",
    ),
    "grouped_attention_layer": (
        "heads, as above",
        (
            "the framework's grouped-query attention layer holding these kernels, no biases, an identity output "
            "projection (so N * H must equal the model width)"
        ),
    ),
    "decode_paths": (
        (
            '`{"batched", "alone"}`: heads (.., N, T - start, H) of the queries start..T-1, query p over keys 0..p, '
            "query head n over K/V head n // (N / num_kv_heads)"
        ),
        "the fused attention's paths where kernels switch: a block of queries (prefill) and one query (a decode step) "
        "at the key counts, head sizes and grouped-head ratios kernels tile by (conventions.kernel_paths)",
    ),
    "sink_decode_paths": (
        '`{"batched", "alone"}`, as above, head n\'s sink sinks[n] in its softmax',
        "those paths with the fused attention's sinks (`mx.fast.scaled_dot_product_attention(sinks=)`)",
    ),
    "mask_conventions": (
        "context, one head [B, T, H]; mask [B, T, S], True = hidden (the suite's convention)",
        (
            "the mask handed to the framework's attention op in that op's own convention: `api` \"bool\" (its boolean "
            'mask) or "additive" (`fill` "neg_inf", "large_negative" = -1e9, "dtype_min")'
        ),
    ),
    "layer_mask": (
        (
            "context; the attention_module layer (weights in the reference form), mask [B, T, S] True = hidden on "
            "every head"
        ),
        "the mask handed to the framework's attention layer in the layer's own convention",
    ),
    "layer_key_padding": (
        "context; the same layer, padding [B, S] True = a padded key (hidden from every query)",
        "padding through the layer's own key-padding argument, `causal` through its own causal switch",
    ),
}
