"""Drawing the cases of the families where 2025-26's ports and kernels broke (issue 61): ALiBi, QK-norm,
cross-attention and T5's bias, the shapes kernels switch at, packed documents; flash-attention's masks (issue 74):
a two-sided window, padded queries; and Llama 4's attention (issue 72). tools/fuzz/cases.py draws the rest
and hands these ops here with its own helpers (`x`, `w` and `tensor` draw tokens, weights and any tensor)."""

import numpy as np

from attention_conformance.adapters.reference import _t5_ties

OPS = (
    "alibi_attention",
    "alibi_flag",
    "qk_norm_attention",
    "qk_norm_flag",
    "cross_attention",
    "cross_attention_flag",
    "t5_attention",
    "decode_paths",
    "sink_decode_paths",
    "varlen_attention",
    "varlen_flag",
    "varlen_unrotated_flag",
    "band_attention",
    "band_flag",
    "query_padding_attention",
    "query_padding_flag",
    "chunked_attention",
    "chunked_flag",
    "llama4_attention",
)
# Llama 4's query heads over K/V heads (Scout's 40 over 8 is 5: a ratio past a power of two) and its temperature's
# steps: every position, a few, and Llama 4's own 8192 (no effect at these lengths), its slopes 0 (none), 0.1, 1.
LLAMA4_GROUPS = ((1, 1), (2, 1), (4, 2), (5, 1), (4, 4))
FLOOR_SCALES = (2, 1, 3, 8192)
# Where fused kernels switch paths (conventions.kernel_paths): key counts at a tile and one past it, a head size each
# kernel specialises (64, 80, 128) beside odd ones.
PATH_KEYS = (1, 2, 17, 31, 33, 64, 65, 97, 129, 257, 513)
PATH_HEADS = (1, 3, 8, 64, 80, 128)
PATH_GROUPS = ((1, 1), (2, 1), (4, 2), (4, 1), (8, 1), (8, 8))  # (query heads, K/V heads): MHA, GQA's ratios, MQA
SINK_RANGES = ((-3.0, 3.0), (5.0, 10.0), (-40.0, 40.0))  # beside, above and far above the scores
# A packed row's documents: one token (a weight of exactly 1), a few, and one off torch's 32- and 64-query tiles.
DOCUMENTS = (1, 2, 3, 5, 31, 33, 63, 65)


def draw_inputs(draw, op, T, D, H, lead, x, w, tensor, tokens):
    """One drawn case's inputs for `op` of OPS: T, D, H and the batch `lead` as cases.py drew them for every op."""
    from hypothesis import strategies as st

    if op in ("alibi_attention", "alibi_flag"):  # head counts past a power of two, where BLOOM's rule interleaves
        N = draw(st.sampled_from((1, 2, 3, 4, 5, 6, 8, 12)))
        weights = {n: w(D, N * H) for n in ("w_query", "w_key", "w_value")}
        return {"x": x(), **weights, "num_heads": N, "causal": draw(st.booleans())}
    if op in ("qk_norm_attention", "qk_norm_flag"):  # per head or not, weights near 1 and near 0, eps up to 0.1
        N, H, per_head = (
            draw(st.sampled_from((1, 2, 3, 4))),
            draw(st.sampled_from((2, 4, 8, 16, 64))),
            draw(st.booleans()),
        )
        gains = {
            n: tensor(draw, [H if per_head else N * H], ((0.5, 1.5), (-0.2, 0.2), (-2.0, 2.0)))
            for n in ("norm_weight_q", "norm_weight_k")
        }
        weights = {n: w(D, N * H) for n in ("w_query", "w_key", "w_value")}
        eps = draw(st.sampled_from((1e-6, 1e-5, 0.01, 0.1)))
        return {
            "x": x(),
            **weights,
            "num_heads": N,
            **gains,
            "eps": eps,
            "per_head": per_head,
            "causal": draw(st.booleans()),
        }
    if op in (
        "cross_attention",
        "cross_attention_flag",
    ):  # a memory shorter, as long and longer, its padding trailing
        N, S = draw(st.sampled_from((1, 2, 3, 4))), draw(st.sampled_from(tokens))
        lengths = [draw(st.integers(1, S)) for _ in range(lead[0])]
        weights = {n: w(D, N * H) for n in ("w_query", "w_key", "w_value")}
        padding = [[j >= n for j in range(S)] for n in lengths]
        return {"x": x(), "memory": x(t=S), **weights, "num_heads": N, "padding": padding}
    if op == "t5_attention":  # T5's own buckets and small ones, the sequence short of the first tie (_t5_ties)
        N = draw(st.sampled_from((1, 2, 3, 4)))
        num_buckets, max_distance = draw(st.sampled_from(((32, 128), (8, 20), (12, 30), (16, 40), (64, 256))))
        bidirectional = draw(st.booleans())
        ties = _t5_ties(num_buckets, max_distance, bidirectional, T)
        T = min(T, ties[0]) if ties else T  # distances up to T - 1, below the first tie
        return {
            "x": x(t=T),
            **{n: w(D, N * H) for n in ("w_query", "w_key", "w_value")},
            "num_heads": N,
            "bias_table": tensor(draw, [num_buckets, N], ((-2.0, 2.0), (-10.0, 10.0))),
            "num_buckets": num_buckets,
            "max_distance": max_distance,
            "bidirectional": bidirectional,
            "causal": draw(st.booleans()),
        }
    if op in ("decode_paths", "sink_decode_paths"):  # key counts at a tile and one past it, the last queries alone
        (N, K), H = (
            draw(st.sampled_from(PATH_GROUPS)),
            draw(st.sampled_from(PATH_HEADS)),
        )
        T = draw(st.sampled_from(PATH_KEYS))
        start = (
            draw(st.sampled_from((0, T - 1, max(0, T - 2), max(0, T - 4)))) if T <= 33 else T - draw(st.integers(1, 3))
        )
        inputs = {"x": x(t=T), "w_query": w(D, N * H), "w_key": w(D, K * H), "w_value": w(D, K * H)}
        inputs |= {"num_heads": N, "num_kv_heads": K, "start": start}
        if op == "sink_decode_paths":
            inputs["sinks"] = tensor(draw, [N], SINK_RANGES)
        return inputs
    if op in ("band_attention", "band_flag"):  # a key a side, none, no limit (-1), the whole sequence and past it
        reach = (-1, 0, 1, 2, 3, max(1, T // 2), T, T + 3)
        weights = {n: w(D, H) for n in ("w_query", "w_key", "w_value")}
        return {"x": x(), **weights, "left": draw(st.sampled_from(reach)), "right": draw(st.sampled_from(reach))}
    if op in ("query_padding_attention", "query_padding_flag"):  # each row padded after its tokens or before them
        rows = []
        for _ in range(lead[0]):
            real, before = draw(st.integers(0, T)), draw(st.booleans())  # a row all padding: a batch's empty sequence
            rows.append([j < T - real if before else j >= real for j in range(T)])
        weights = {n: w(D, H) for n in ("w_query", "w_key", "w_value")}
        return {"x": x(), **weights, "padding": rows, "causal": draw(st.booleans())}
    if op in ("chunked_attention", "chunked_flag"):  # chunks of one, a few, half and past the row; left padding
        weights = {n: w(D, H) for n in ("w_query", "w_key", "w_value")}
        # Mostly chunks that cut the row and a few tokens of padding (where chunks counted from index 0 cut
        # elsewhere), then one token a chunk, a chunk past the row, no padding; a real token left in every row.
        T = T if T > 3 or draw(st.booleans()) else T + 6  # half the rows of 1..3 tokens, where no chunk cuts, longer
        chunk = draw(st.sampled_from((3, 2, 5, max(2, T // 2), 1, T + 3)))
        padded = [min(T - 1, draw(st.sampled_from((1, 2, 3, max(1, T // 2), 0)))) for _ in range(lead[0])]
        return {"x": x(t=T), **weights, "chunk": chunk, "padding": [[j < n for j in range(T)] for n in padded]}
    if (
        op == "llama4_attention"
    ):  # either layer, chunks or none, a decode's offset, weights small enough for eps to tell
        T = T if T > 3 or draw(st.booleans()) else T + 6  # half the rows of 1..3 tokens longer: chunks, steps, decodes
        (N, K), H = draw(st.sampled_from(LLAMA4_GROUPS)), 2 * draw(st.sampled_from((1, 2, 4, 32)))
        weights = {"w_query": w(D, N * H), "w_key": w(D, K * H), "w_value": w(D, K * H)}
        return {
            "x": x(t=T),
            **weights,
            "num_heads": N,
            "num_kv_heads": K,
            "use_rope": draw(st.booleans()),
            "chunk": draw(st.sampled_from((0, 1, 2, 3, max(1, T // 2), T))),
            "floor_scale": draw(st.sampled_from(FLOOR_SCALES)),
            "attn_scale": draw(st.sampled_from((0.1, 1.0, 0.0))),
            "eps": draw(st.sampled_from((1e-6, 1e-5, 0.01))),
            "start": draw(st.sampled_from((T - 1, T // 2, 1, 0))) % T,  # decodes past position 0, and a prefill
        }
    # Documents of one token, cut one off a tile, one filling the row.
    if op in ("varlen_attention", "varlen_flag", "varlen_unrotated_flag"):
        N, H = draw(st.sampled_from((1, 2, 3, 4))), 2 * draw(st.sampled_from((1, 2, 4, 32)))
        # Two documents or more, where the cuts and a padded batch's padding are: one alone is a sixth of the draws.
        lengths = draw(st.lists(st.sampled_from(DOCUMENTS), min_size=2, max_size=5))
        if draw(st.integers(0, 5)) == 5:
            lengths = lengths[:1]
        weights = {n: w(D, N * H) for n in ("w_query", "w_key", "w_value")}
        cu_seqlens = np.cumsum([0] + lengths).tolist()
        lead[0] = 1  # one packed row: x() draws [*lead, T, D]
        return {
            "x": x(t=cu_seqlens[-1]),
            **weights,
            "num_heads": N,
            "cu_seqlens": cu_seqlens,
            "causal": draw(st.booleans()),
        }
    raise ValueError(f"no draws for {op!r} here")
