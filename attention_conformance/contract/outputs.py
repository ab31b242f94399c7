"""The contract's words for the parts of a function: what each output of a many-output function is, and what each
value of a choice parameter selects. docs/contract.md's "What each output is" and "Choices" are generated from these
by `attention-conformance publish` (tests/publish/test_docs.py: not stale; every output and value has its words)."""

# function -> {output: what it is}, for each function with more than one output (a single output is its `returns`
# above). docs/contract.md's "What each output is" is generated from it.
OUTPUTS = {
    "create_parameter": {
        "parameter": "the parameter's values, [d_in, d_out], as the framework initialised them from `seed`",
        "trainable": "whether the framework will compute the parameter's gradient (`requires_grad`)",
    },
    "attention": {
        "query": "`x @ w_query`, (.., T, H)",
        "key": "`x @ w_key`, (.., S, H)",
        "value": "`x @ w_value`, (.., S, H)",
        "scores": "`query @ key^T` before any scaling, (.., T, S): the raw dot products",
        "d_k": "the keys' width H, an int: the scores are divided by its square root",
        "weights": "softmax(scores / sqrt(d_k)) over the keys, (.., T, S); each row sums to 1",
        "context": "`weights @ value`, (.., T, H)",
    },
    "self_attention_v1": {
        "context": "SelfAttention_v1's forward on x, its three weights [d_in, d_out] used as `x @ W`",
        "context_no_grad": "the same forward under the framework's no-gradient mode (`torch.no_grad()`): must equal it",
    },
    "exercise_3_1": {
        "context": "SelfAttention_v1 given v2's weights (nn.Linear's [d_out, d_in]) transposed",
        "context_v2": "SelfAttention_v2 given the same weights as they are: must equal `context`",
    },
    "parameters": {
        "count": "how many trainable numbers module form `form` holds (3 * d_in * d_out: neither form has biases)",
        "trainable": "one bool per parameter tensor, in the order the framework lists them: whether it is trainable",
    },
    "causal_attention": {
        "weights": "one head's softmax of the scaled scores with key j hidden from query i when j > i (-inf "
        "before the softmax, so exactly 0 above the diagonal), (.., T, T)",
        "context": "`weights @ value`, (.., T, H)",
    },
    "masked_attention": {
        "weights": "one head's softmax of the scaled scores, every key `mask` marks True hidden (weight 0), (.., T, S)",
        "context": "`weights @ value`, (.., T, H)",
    },
    "dropout": {
        "dropout_eval": "the framework's dropout on `weights` in evaluation mode: the weights unchanged",
        "dropout_train": "in training mode: each weight zeroed with probability p and the rest divided by 1 - p, from "
        "the framework's own random stream (checked by the fraction zeroed and the survivors' value, not element "
        "by element)",
    },
    "multi_head_attention": {
        "heads": "each head's context before merging, (.., N, T, H); head n from columns n*H:(n+1)*H of each weight",
        "context": "the heads concatenated along the last axis, then `@ w_out`, (.., T, d_model)",
    },
    "initial_weights": {
        "w_query": "W_query as module form `form` initialises it from `seed` (v1: torch.rand's uniform [0, 1), "
        "[d_in, d_out]; v2: nn.Linear's uniform(-1/sqrt(d_in), 1/sqrt(d_in)), [d_out, d_in]); checked by range "
        "and statistics, never element by element",
        "w_key": "W_key, drawn as W_query",
        "w_value": "W_value, drawn as W_query",
    },
    "knobs_removed": {
        "part6": "the document's part 6: softmax(x x^T) x, no weights and no scaling",
        "part6_scaled": "part 6 with the scores divided by sqrt(D), D = x's width",
        "part7_identity": "part 7's attention with W_query = W_key = W_value = I: softmax(x x^T / sqrt(D)) x, "
        "which equals part6_scaled, not part6 (the erratum)",
        "part7_identity_unscaled": "the same with W = I and the scaling left out: equals part6",
    },
    "gradients": {
        "grad_w_query": "dL/dW_query for L = sum(context * g), through the framework's autograd, in the layout the "
        "weight came in ([d_in, d_out] for v1, nn.Linear's [d_out, d_in] for v2)",
        "grad_w_key": "dL/dW_key, as grad_w_query",
        "grad_w_value": "dL/dW_value, as grad_w_query",
        "grad_x": "dL/dx, x's shape",
    },
    "sgd_step": {
        "w_query": "W_query after one step of the framework's SGD at learning rate lr on L = sum(context * g)",
        "w_key": "W_key after that step",
        "w_value": "W_value after that step",
    },
    "attention_module": {
        "context": "the layer's output for x, (B, T, E) whatever order `layer` feeds the layer in: output "
        "projection and biases included; causal if `causal`",
        "weights": "the layer's attention weights per head, (B, N, T, S), or averaged over the heads for "
        "`layer` mha_averaged",
        "round_trip": "the layer's own weights read back in its layout, converted with `ports.from_layout` and "
        "flattened with `ports.flat`: must equal the checkpoint's numbers",
    },
    "layer_defaults": {
        "bias": "whether the layer, constructed with the framework's defaults, has biases",
        "dropout": "its default attention dropout probability",
        "averaged_weights": "whether it returns head-averaged weights by default",
        "w_query": "its default-initialised W_query in the reference form ([d_in, d_in], via `ports.from_layout`); "
        "checked by range and statistics",
    },
    "decode_attention": {
        "context": "the queries at positions start..T-1 over all T keys in one pass, query p seeing keys 0..p "
        "(the causal mask's diagonal offset by start), one head (.., T - start, H)",
        "stepwise": "the same queries one token at a time, each attending to a KV cache of the keys and values so "
        "far: must equal `context`",
    },
    "decode_paths": {
        "batched": "the heads of queries start..T-1 through one call of the fused attention (S = T - start), query p "
        "seeing keys 0..p, (.., N, T - start, H)",
        "alone": "the same queries, each through a call of its own over its keys 0..p (S = 1): must equal `batched`",
    },
    "sink_decode_paths": {
        "batched": "as decode_paths' `batched`, head n's sink sinks[n] in its softmax",
        "alone": "as decode_paths' `alone`, with the same sinks: must equal `batched`",
    },
    "window_attention": {
        "weights": "one head's weights of queries start..T-1 over all T keys, query p seeing keys p-window+1..p "
        "only (weight 0 elsewhere), (.., T - start, T)",
        "context": "`weights @ value`, (.., T - start, H)",
    },
    "rotary_port": {
        "interleaved": "the context of the interleaved-pairing model as it is (causal heads, queries start..T-1)",
        "converted": "the context after permuting each head's query and key columns for rotate_half pairing and "
        "running the rotate_half model: must equal `interleaved`",
        "restored": "the columns permuted back and run interleaved again: must equal `interleaved`",
    },
    "rope_frequencies": {
        "frequencies": "pair i's frequency, [rotary_dim / 2], float32 (HF's inv_freq): theta^(-2i/R) scaled by "
        "`rope_type`",
        "attention_factor": "the number cos and sin are multiplied by, a scalar: 0.1 ln(factor) + 1 for yarn, else 1",
    },
    "softcap_attention": {
        "weights": "one head's softmax of cap * tanh(s / cap), s the scaled scores (causal: the mask after the cap), "
        "(.., T, S); cap 0 leaves s",
        "context": "`weights @ value`, (.., T, H)",
    },
    "sink_attention": {
        "weights": "each head's weights over the real keys, (B, N, T, S): the softmax taken with head n's sink logit "
        "as one more key, which is then left out (a row sums to less than 1)",
        "context": "the heads' `weights @ value` concatenated, (B, T, N*H); a row whose keys are all hidden is 0",
    },
    "alibi_attention": {
        "weights": "each head's softmax of its scaled scores plus slopes[n] * (j - i) (causal: the mask after the "
        "bias), (B, N, T, S)",
        "context": "the heads' `weights @ value` concatenated, (B, T, N*H)",
    },
    "qk_norm_attention": {
        "queries": "each head's queries as they enter the scores: RMS-normed (per head or over the projection), times "
        "the weight, then rotated, (B, N, T, H)",
        "weights": "each head's softmax of its normed, rotated queries and keys, scaled by 1/sqrt(H), (B, N, T, S)",
        "context": "the heads' `weights @ value` concatenated, (B, T, N*H)",
    },
    "qk_norm_flag": {
        "queries": "as qk_norm_attention's, the norm through the framework's own RMSNorm, (B, N, T, H)",
        "context": "the heads' `weights @ value` concatenated, (B, T, N*H)",
    },
    "cross_attention": {
        "weights": "each head's softmax of its queries (from x) against the memory's keys, scaled by 1/sqrt(H), padded "
        "memory tokens hidden, (B, N, T, S); a row whose memory is all padding is 0",
        "context": "the heads' `weights @ value` (values from the memory) concatenated, (B, T, N*H)",
    },
    "t5_attention": {
        "weights": "each head's softmax of its unscaled scores plus bias_table[bucket(j - i), n] (causal: the mask "
        "after the bias), (B, N, T, S)",
        "context": "the heads' `weights @ value` concatenated, (B, T, N*H)",
    },
    "band_attention": {
        "weights": "one head's softmax of the scaled scores, key j hidden from query i when j < i - left or j > i + "
        "right (a side of -1 hides nothing), (B, T, T)",
        "context": "`weights @ value`, (B, T, H)",
    },
    "query_padding_attention": {
        "weights": "one head's softmax of the scaled scores, the padding's keys hidden (and the future if `causal`); "
        "a padding token's row 0, (B, T, T)",
        "context": "`weights @ value`, a padding token's row 0, (B, T, H)",
    },
    "varlen_attention": {
        "queries": "each head's queries rotated at their positions in their own document (0 at each document's "
        "start), (1, N, T, H)",
        "weights": "each head's softmax over its own document's keys (causal: those up to the query), 0 across "
        "documents, (1, N, T, T)",
        "context": "the heads' `weights @ value` concatenated, (1, T, N*H)",
    },
    "varlen_flag": {
        "packed": "the context through one call of the fused attention on the packed row (the framework's varlen "
        "route, or a document mask built from cu_seqlens), (1, T, N*H)",
        "padded": "the same through the fused attention on the documents as a padded batch [n, longest, ..], its rows "
        "put back end to end: must equal `packed`",
    },
    "varlen_unrotated_flag": {
        "packed": "varlen_flag's packed with no RoPE, (1, T, N*H)",
        "padded": "varlen_flag's padded with no RoPE: must equal `packed`",
    },
    "chunked_attention": {
        "weights": "one head's softmax of the scaled scores, key j hidden from query i after i, in another chunk or "
        "padding; a padding row 0, (B, T, T)",
        "context": "`weights @ value`, a padding row 0, (B, T, H)",
    },
    "llama4_attention": {
        "queries": "each head's queries as they enter the scores: turned and normed (RoPE layer) or scaled by their "
        "temperature (NoPE layer), (B, N, T - start, H)",
        "context": "the heads' `weights @ value` concatenated, (B, T - start, N*H)",
    },
    "attention_stages": {
        "scaled": "one head's q k^T / sqrt(H), (B, T, S), unmasked",
        "capped": "cap * tanh(scaled / cap), unmasked (cap 0: equal to scaled)",
        "weights": "the softmax of `capped` with the causal mask (if `causal`) applied before it",
    },
}

# choice parameter -> {value: what it selects}; docs/contract.md's "Choices" is generated from it and ops.CHOICES.
CHOICE_WORDS = {
    "form": {
        "v1": "SelfAttention_v1: three nn.Parameter weights [d_in, d_out], used as `x @ W`",
        "v2": "SelfAttention_v2: three nn.Linear(d_in, d_out, bias=False) layers, weights stored [d_out, d_in]",
    },
    "distribution": {"uniform": "uniform on [0, 1)", "normal": "standard normal"},
    "layer": {
        "mha": "the framework's multi-head attention layer, batch first, per-head weights",
        "mha_averaged": "the same layer returning weights averaged over the heads",
        "mha_seq_first": "the same layer fed (T, B, E), sequence first",
        "gpt2": "GPT-2's attention block (one packed c_attn projection)",
    },
    "checkpoint": {
        "reference": "the suite's own form: eight arrays, `x @ W` (ports.REFERENCE); what a layer storing `x @ W` "
        "kernels (TensorFlow's, Paddle's) reads with little change",
        "torch": "nn.MultiheadAttention's state_dict: in_proj_weight [3E, E] (q, k, v stacked, each transposed)",
        "keras": "keras.layers.MultiHeadAttention's kernels [E, N, head_dim] and attention_output [N, head_dim, E]",
        "flax": "flax.nnx.MultiHeadAttention's kernels [E, N, head_dim] and out [N, head_dim, E]",
        "gpt2": "GPT-2's Conv1D: c_attn.weight [E, 3E] (q, k, v side by side), c_proj.weight [E, E]",
    },
    "api": {
        "bool": "the op's boolean mask argument, in the op's own polarity",
        "additive": "an additive float mask: 0 where a key is seen, `fill` where hidden",
    },
    "fill": {
        "neg_inf": "-inf where hidden",
        "large_negative": "-1e9 where hidden",
        "dtype_min": "the dtype's most negative finite number where hidden",
    },
    "pairing": {
        "interleaved": "RoPE turns pairs of neighbouring dims (2i, 2i+1): GPT-J, Meta's original Llama",
        "rotate_half": "RoPE turns dims i and i + rotary_dim/2 together: GPT-NeoX, Hugging Face's Llama",
    },
    "scaling": {
        "none": "RoPE's frequencies as they are",
        "linear": "every frequency divided by `factor` (Hugging Face's rope_type linear)",
        "llama3": "Llama 3.1's frequency-dependent scaling (factor 8, low_freq_factor 1, high_freq_factor 4)",
    },
    "rope_type": {
        "ntk": "bloc97's NTK-aware base: theta * factor^(R / (R - 2)), for every length",
        "dynamic": "HF's dynamic NTK: that base with factor L / L0 - (factor - 1) for a sequence of L > L0 positions, "
        "theta up to L0",
        "yarn": "YaRN (arXiv:2309.00071): frequencies ramped between theta^(-2i/R) and it over factor, cos and sin "
        "times 0.1 ln(factor) + 1",
    },
}
