"""The conventions past the documents that `explain` tries on a file (command.py): where causal order starts, windows,
Llama 4's chunks, soft caps, biases, sinks, RoPE, packed documents, QK-norm and RoPE scaling, each the wrong side a
framework or a port is known to take, as (name, what it means, the Problem's compute arguments)."""

import numpy as np


def past_the_documents(p):
    """The conventions of issue 40's and 61's families that a file states: windows, soft caps, sinks, RoPE and packed
    documents."""
    found = []
    if p.documents is not None:
        found.append(
            (
                "the packed documents attending to each other",
                "the row attended as one sequence, cu_seqlens not given to the attention (Megatron-LM without "
                "reset_attention_mask); a token sees its own document's keys only",
                dict(hidden=p.keys_hidden(documents=None)),
            )
        )
    if p.window:
        found.append(
            (
                "a window one key wider",
                f"query p saw keys p-{p.window}..p, {p.window + 1} keys (the Mistral paper's wording, "
                f"transformers#29623); a window of {p.window} is p-{p.window - 1}..p, the query's own included",
                dict(hidden=p.keys_hidden(window=p.window + 1)),
            )
        )
        if p.right_window:
            found.append(
                (
                    "the right window ignored",
                    f"the band stopped at the query's own position, where it reaches {p.right_window} keys past it",
                    dict(hidden=p.keys_hidden(right=0)),
                )
            )
        if p.position or p.valid is not None:
            found.append(
                (
                    "a window aligned top-left",
                    "the band started at key 0 for the first query; decoding needs it at the query's own position",
                    dict(hidden=p.keys_hidden(position=0)),
                )
            )
    if p.chunk:
        found.append(
            (
                "no chunks",
                f"every earlier key attended, where Llama 4's RoPE layers see their own chunk of {p.chunk} "
                "positions only (a chunked layer given the full-attention layers' mask)",
                dict(hidden=p.keys_hidden(chunk=None)),
            )
        )
        found.append(
            (
                "chunks one position later",
                f"chunks of positions 1..{p.chunk}, {p.chunk + 1}..{2 * p.chunk}, ..: positions counted from 1, or a "
                f"left padding of one token counted (transformers' chunked_overlay cuts at 0, {p.chunk}, .. from a "
                "row's first real token)",
                dict(hidden=p.keys_hidden(chunk_origin=-1)),
            )
        )
        if p.position:
            found.append(
                (
                    "chunks counted from the query block",
                    "the queries' chunks counted from the block's first row, not their positions (a decode step's "
                    "chunk mask built without the cache's offset)",
                    dict(hidden=p.keys_hidden(chunk_position=0)),
                )
            )
    if p.cap:
        found.append(
            (
                "soft-capping after the mask",
                f"a hidden key's -inf capped to -{p.cap:g}, so probability leaks to it (onnx#7867); capping comes "
                "before the mask",
                dict(cap_after_mask=True),
            )
        )
        found.append(("no soft-capping", f"the scores used uncapped, where the cap is {p.cap:g}", dict(cap=0.0)))
        if p.bias is not None:
            found.append(
                (
                    "the bias added before soft-capping",
                    "the biased scores capped; the cap comes first, then the bias (ONNX's Attention, Gemma 2's mask)",
                    dict(bias_before_cap=True),
                )
            )
    elif p.cap == 0:
        found.append(
            (
                "a cap of 0 read as zero logits",
                "0 x tanh(s / 0) makes every score 0 and every row uniform; a cap of 0 is no cap (Megatron-LM#6590)",
                dict(cap="zero"),
            )
        )
    if p.bias is not None:  # its -inf entries hide keys (p.hidden) in each of these: its finite values differ
        found.append(
            ("the bias ignored", "its finite values left out of the scores (its -inf entries kept)", {"bias": None})
        )
        for times, wrong, why in (
            (2.0, "doubled", "ALiBi's slopes?"),  # a slope table ported wrong, say
            (0.5, "halved", "ALiBi's slopes?"),
            (-1.0, "negated", "ALiBi's distance as i - j, not j - i?"),
        ):
            found.append((f"the bias {wrong}", f"its finite values x {times:g} ({why})", {"bias": p.bias * times}))
        if np.ndim(p.bias) >= 3 and np.shape(p.bias)[-3] > 1:  # [.., N, T, S]: a slope table read back to front
            why = "head n given head N-1-n's bias (ALiBi's slopes in reverse head order?)"
            found.append(("the bias's heads reversed", why, {"bias": p.bias[..., ::-1, :, :]}))
    if p.sinks is not None:
        found.append(("the sink ignored", "a plain softmax over the keys, each row summing to 1", dict(sinks=None)))
    if p.pairing:
        other = "rotate_half" if p.pairing == "interleaved" else "interleaved"
        found.append(
            (
                f"RoPE with {other} pairs",
                f"the pairs turned as {other}, where the model's are {p.pairing}: its query and key columns need "
                "permuting (docs/frameworks.md)",
                dict(pairing=other),
            )
        )
        if p.documents is not None:
            found.append(
                (
                    "RoPE positions running on across the packed row",
                    "each token turned at its place in the whole row, not in its document (Megatron-LM without "
                    "reset_position_ids); transformers' flattening collator and flash-attn's varlen restart them",
                    dict(position=0),
                )
            )
        elif p.position_ids is not None:
            if p.T == p.S:
                found.append(
                    (
                        "RoPE keys turned at 0..S-1",
                        "the keys turned at positions 0..S-1, not at the position_ids the queries take: without a "
                        "cache each key is a query's own token (transformers' apply_rotary_pos_emb turns both alike)",
                        dict(keys_from_zero=True),
                    )
                )
            found.append(
                (
                    "RoPE position_ids ignored",
                    "the queries turned at positions 0..T-1, not at their position_ids",
                    dict(position=0),
                )
            )
        elif p.position:
            found.append(
                (
                    "no RoPE position offset",
                    f"the queries turned from position 0, not {p.position}: the cache's length not added",
                    dict(position=0),
                )
            )
    return found


def offsets(p):
    """Where causal order starts, as frameworks split on it: top-left (torch's is_causal), bottom-right of the keys
    (flash-attn's, the suite's default), or after the keys cached before the block or from each row's valid length
    (ONNX's past length and nonpad_kv_seqlen); and the valid lengths dropped."""
    found, default = [], p.valid is None and p.position == p.S - p.T
    if p.valid is not None:
        stated = "each row's first query at its valid length - T (ONNX's nonpad_kv_seqlen)"
    else:
        stated = f"the first query at position {p.position}, after the keys cached before it (ONNX's past length)"
    if p.causal and (p.position or p.valid is not None):
        found.append(
            (
                "top-left causal alignment",
                "query i sees keys 0..i; "
                + (
                    "the suite aligns bottom-right (query i sees keys 0..i + S - T, so the last query sees "
                    "every key), as decoding with a KV cache needs"
                    if default
                    else f"this file puts {stated}"
                ),
                dict(hidden=p.keys_hidden(position=0)),
            )
        )
    if p.causal and not default:
        found.append(
            (
                "causal aligned bottom-right",
                f"query i saw keys 0..i + S - T, the last query every key (flash-attn's); this file puts {stated}",
                dict(hidden=p.keys_hidden(position=p.S - p.T)),
            )
        )
    if p.valid is None:
        return found
    for where, position in (("top-left", 0), ("bottom-right", p.S - p.T)) if p.causal or p.window else ((None, 0),):
        found.append(
            (
                "per-row valid length ignored" + (f" (causal {where})" if where else ""),
                "every row saw the padding past its valid length"
                + (f", causal order {where} over all the keys" if where else "")
                + ": nonpad_kv_seqlen (ONNX) or the cache's lengths not passed",
                dict(hidden=p.keys_hidden(valid=None, position=position)),
            )
        )
    return found


def before_the_scores(p):
    """QK-norm's and RoPE scaling's wrong sides, where the file states them (tools/qk.py)."""
    found = []
    if p.norm is not None:
        n, (w_q, w_k) = p.norm, p.norm["weights"]
        if p.pairing:
            why = "the rotated queries and keys normed; Qwen3, Gemma 3 and OLMo 2 norm them before RoPE"
            found.append(("QK-norm after RoPE", why, dict(norm=n | dict(after_rope=True))))
        found.append(("no QK-norm", "q and k used as given, their RMSNorm (q_norm, k_norm) skipped", dict(norm=None)))
        found.append(
            (
                "the norm's weight as Gemma's 1 + w",
                "each weight w applied as 1 + w (Gemma 3's RMSNorm: `x * (1.0 + self.weight)`, its checkpoint "
                "storing w - 1): from a Gemma checkpoint, give 1 + w as norm_weight_q and norm_weight_k",
                dict(norm=n | dict(weights=(1 + w_q, 1 + w_k))),
            )
        )
        found.append(
            (
                "eps outside the root",
                f"x / (sqrt(mean(x^2)) + eps), a hand-written RMSNorm's x.norm() / sqrt(d) + eps; transformers' "
                f"and the models' own put it under the root, x / sqrt(mean(x^2) + eps) (eps {n['eps']:g})",
                dict(norm=n | dict(eps_outside=True)),
            )
        )
        width = p.H * (p.heads if n["over_heads"] and p.headed else 1)  # the dims one mean of squares is over
        found.append(
            (
                "an L2 norm, x / ||x||",
                f"q and k divided by their length (torch's F.normalize), {np.sqrt(width):.3g} = sqrt({width}) times "
                "smaller than an RMS norm's x / sqrt(mean(x^2) + eps): Llama 4's Llama4TextL2Norm, despite its name, "
                "is an RMS norm with no weight",
                dict(norm=n | dict(weights=(w_q / np.sqrt(width), w_k / np.sqrt(width)), eps=0.0)),
            )
        )
        for eps in (1e-6, 1e-5):  # rms_norm_eps of Qwen3's, OLMo 2's and Gemma 3's configs; Llama's
            if not np.isclose(eps, n["eps"], rtol=1e-9, atol=0):
                stated = f"this file says {n['eps']:g}" if "eps" in p.arrays else f"this file gives none ({n['eps']:g})"
                why = f"the RMSNorm's eps {eps:g}, where {stated}: another model's rms_norm_eps?"
                found.append((f"QK-norm's eps {eps:g}", why, dict(norm=n | dict(eps=eps))))
        if p.headed and p.heads > 1 and not n["over_heads"]:
            heads = (np.tile(w_q, p.heads), np.tile(w_k, p.kv_heads))
            why = "the RMS taken over all heads' N x H dims at once (OLMo 2's), where the [H] weights norm each head"
            wrong = dict(norm=n | dict(over_heads=True, weights=heads))
            found.append(("QK-norm over the whole projection", why, wrong))
        elif n["over_heads"]:
            why = "each head's H dims normed alone (Qwen3's, Gemma 3's), where [N x H] weights norm the projection"
            found.append(("QK-norm per head", why, dict(norm=n | dict(over_heads=False))))
        if w_q.shape == w_k.shape and not np.array_equal(w_q, w_k):
            why = "the queries normed with norm_weight_k and the keys with norm_weight_q"
            found.append(("the norm weights swapped", why, dict(norm=n | dict(weights=(w_k, w_q)))))
    if p.pairing and p.scaling is not None:
        found += _scaling_sides(p, p.scaling)
    return found


def _scaling_sides(p, s):
    kind, factor, L0 = s["rope_type"], s["factor"], s["original_max_positions"]
    found = [
        (
            "no RoPE scaling",
            f"RoPE's own frequencies at theta {p.theta:g}: the model's {kind} scaling (factor {factor:g}) not applied, "
            "its config's rope_scaling (rope_parameters in transformers 5) not read",
            dict(scaling=None),
        )
    ]
    if kind == "llama3":
        why = "every frequency divided by the factor; Llama 3.1's keeps those of wavelength under 2048, blends to 8192"
        found.append(("linear scaling for llama3's", why, dict(scaling=s | dict(rope_type="linear"))))
    if kind == "yarn":
        found.append(
            (
                "YaRN without its attention factor",
                f"cos and sin not multiplied by 0.1 ln({factor:g}) + 1: left out, or moved to the softmax scale "
                "(DeepSeek-V2/V3's mscale squared, the other side of conventions.rope_scaling), which leaves out as "
                "it is and changes q_rotated alone",
                dict(scaling=s | dict(attention_factor=False)),
            )
        )
        ramp = "kept fractional (truncate false, gpt-oss's)" if s["truncate"] else "floored and ceiled (truncate true)"
        found.append(
            (
                f"YaRN's ramp ends {ramp.split(' (')[0]}",
                f"its low and high pairs {ramp}, where this file says truncate {s['truncate']}",
                dict(scaling=s | dict(truncate=not s["truncate"])),
            )
        )
    if kind == "dynamic":
        at = int(L0 * factor)
        found.append(
            (
                "dynamic NTK's base at L0 x factor",
                f"the base for {at} positions at every length (vLLM's DynamicNTKScalingRotaryEmbedding builds one "
                f"table); transformers' grows with the sequence, its last position + 1 ({s['length']} here)",
                dict(scaling=s | dict(fixed_length=at)),
            )
        )
        why = f"theta x {factor:g}^(R/(R-2)) at every length, where dynamic's base is RoPE's own up to L0 ({L0})"
        found.append(("NTK-aware's fixed base for dynamic's", why, dict(scaling=s | dict(rope_type="ntk"))))
    if kind in ("ntk", "dynamic") and p.rotary_dim < p.H:
        found.append(
            (
                "NTK's exponent on the head size",
                f"the base raised with H/(H-2) = {p.H}/{p.H - 2}, not R/(R-2) = {p.rotary_dim}/{p.rotary_dim - 2}: "
                "with a partial rotation the exponent counts the rotated dims (transformers' partial_rotary_factor)",
                dict(scaling=s | dict(exponent_dims=p.H)),
            )
        )
    return found
