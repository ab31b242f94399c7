"""Drawing fuzz's cases: hypothesis strategies in the spec's own vocabulary, leaning on the places
where implementations go wrong (one token, odd head sizes, long rows, large logits, near ties, masks that
hide all keys but one, grouped heads, decoding offsets, square and cube shapes)."""

import numpy as np

from attention_conformance.contract import ops
from attention_conformance.tools.fuzz import families

# The forward ops the fuzzer draws cases for (an adapter's missing or not-applicable ops are left out).
COVERED = (
    "project",
    "transposed_matmul",
    "scale",
    "softmax",
    "blend",
    "attention",
    "self_attention_v1",
    "self_attention_v2",
    "exercise_3_1",
    "causal_attention",
    "masked_attention",
    "multi_head_attention",
    "fused_attention",
    "decode_attention",
    "causal_flag",
    "cache_flag",
    "window_attention",
    "window_flag",
    "band_attention",
    "band_flag",
    "query_padding_attention",
    "query_padding_flag",
    "chunked_attention",
    "chunked_flag",
    "llama4_attention",
    "rotary_embedding",
    "fused_rotary",
    "scaled_rotary",
    "rotary_attention",
    "rotary_port",
    "softcap_attention",
    "softcap_flag",
    "sink_attention",
    "fused_sink_attention",
    "alibi_attention",
    "alibi_flag",
    "qk_norm_attention",
    "qk_norm_flag",
    "cross_attention",
    "cross_attention_flag",
    "t5_attention",
    "varlen_attention",
    "varlen_flag",
    "varlen_unrotated_flag",
    "decoder_attention",
    "attention_stages",
    "scale_flag",
    "packed_fused_attention",
    "key_padding_flag",
    "grouped_attention",
    "grouped_fused_attention",
    "grouped_attention_layer",
    "decode_paths",
    "sink_decode_paths",
    "mask_conventions",
    "attention_module",
    "layer_mask",
    "layer_key_padding",
)

# Cases drawn for each op by default (--examples), split evenly over its shares (at least MIN_SHARE each): enough that
# the wrong adapters of tests/mutants the fuzzer covers are found at every one of 20 seeds (docs/fuzz.md's kill table).
EXAMPLES_PER_OP = 25
MIN_SHARE = 10

# What the drawn numbers are: sizes and ranges chosen so that shrinking heads for the small and plain.
_TOKENS = (1, 2, 3, 4, 5, 7, 8, 16, 33, 64, 128)  # T = 1 first (shrinking goes there), long T last
# Long rows where one row costs little: a softmax's keys, a blend's, a product's, and decoding's cache
# (its oracle computes every query: 4096 keys take 16 s there, so 1024).
_LONG_KEYS = (256, 1024, 4096)
_LONG_CACHE = (256, 1024)
_WIDTHS = (1, 2, 3, 4, 5, 7, 8, 16)  # d_in
_HEAD_SIZES = (1, 2, 3, 4, 5, 7, 8, 16)  # odd ones included
_BATCHES = (1, 2, 3)
X_RANGES = ((-1.0, 1.0), (0.0, 1.0), (-3.0, 3.0), (0.999, 1.0))  # the last: near-equal tokens, near ties
W_RANGES = ((-1.0, 1.0), (-0.5, 0.5), (-4.0, 4.0), (-0.035, 0.035))  # (-4, 4): large logits
SCORE_RANGES = ((-1.0, 1.0), (-10.0, 10.0), (-100.0, 100.0), (-2000.0, 2000.0), (5.0, 5.001))
_FILLS = (0.0, 1.0, 0.5, -1.0)


# --- drawing cases ------------------------------------------------------------------------------


def strategy(drawn_ops, words=None):
    """Cases of the drawn ops; `words` ({parameter: word}) held fixed in every case."""
    from hypothesis import strategies as st

    def tensor(draw, shape, ranges):
        kind = draw(st.integers(0, 11))
        if kind == 9:  # exact ties everywhere
            return {"fill": draw(st.sampled_from(_FILLS)), "shape": list(shape)}
        low, high = draw(st.sampled_from(ranges))
        rng = np.random.default_rng(draw(st.integers(0, 2**16)))
        if kind == 10 and len(shape) == 2 and shape[0] * shape[1] <= 4096:
            # rank one: every row a multiple of one, so sums of them cancel (and scores tie) in bulk
            rows, columns = rng.uniform(low, high, shape[0]), rng.uniform(-1.0, 1.0, shape[1])
            return np.outer(rows, columns).astype(np.float32).tolist()
        if kind == 11 and len(shape) >= 1 and int(np.prod(shape)) <= 8192:
            # wide dynamic range: rows 1e-3..1e3 apart, so small terms ride on large ones
            rows = 10.0 ** rng.integers(-3, 4, size=tuple(shape[:-1]) + (1,))
            return (rng.uniform(low, high, tuple(shape)) * rows).astype(np.float32).tolist()
        return {"uniform": [low, high], "shape": list(shape), "seed": int(rng.integers(0, 2**16))}

    def mask(draw, lead, T, S, start=0):
        """True = hidden; every row keeps a key (a fully masked row is a convention, not a number)."""
        kind = draw(st.sampled_from(("none", "all_but_one", "random", "padding")))
        rng = np.random.default_rng(draw(st.integers(0, 2**16)))
        shape = tuple(lead) + (T, S)
        if kind == "none":
            hidden = np.zeros(shape, dtype=bool)
        elif kind == "all_but_one":
            hidden = np.ones(shape, dtype=bool)
            keep = rng.integers(0, S, size=shape[:-1])
            np.put_along_axis(hidden, keep[..., None], False, axis=-1)
        elif kind == "random":
            hidden = rng.random(shape) < draw(st.sampled_from((0.5, 0.9)))
            empty = hidden.all(axis=-1)
            keep = rng.integers(0, S, size=shape[:-1])
            rows = np.argwhere(empty)
            for r in rows:
                hidden[tuple(r) + (keep[tuple(r)],)] = False
        else:
            hidden = np.zeros(shape, dtype=bool)
            hidden[..., S - int(rng.integers(0, S)) :] = True  # the last keys padded, key 0 never
            hidden[..., 0] = False
        return hidden.tolist()

    @st.composite
    def case(draw):
        op = draw(st.sampled_from(drawn_ops))
        form = draw(st.sampled_from(ops.FORMS[op]))
        lead = [draw(st.sampled_from(_BATCHES))] if form == "batched" else []
        T = draw(st.sampled_from(_TOKENS))
        D, H = draw(st.sampled_from(_WIDTHS)), draw(st.sampled_from(_HEAD_SIZES))
        shape_kind = draw(st.integers(0, 3))  # 0: square (d_in == d_out), 1: a cube (B == T == d), else any
        if shape_kind == 0:
            H = D
        elif shape_kind == 1 and lead:
            lead[0] = T = D = H = draw(st.sampled_from((2, 3, 4)))

        def x(t=T, d=D):
            return tensor(draw, lead + [t, d], X_RANGES)

        def w(rows, cols):
            return tensor(draw, [rows, cols], W_RANGES)

        if op == "project":
            return op, {"x": tensor(draw, [D] if form == "row" else [T, D], X_RANGES), "w": w(D, H)}
        if op == "transposed_matmul":
            S = T if draw(st.booleans()) else draw(st.sampled_from(_TOKENS + _LONG_KEYS))
            return op, {"q": tensor(draw, lead + [T, H], X_RANGES), "k": tensor(draw, lead + [S, H], X_RANGES)}
        if op == "scale":
            return op, {
                "scores": tensor(draw, [T, T], SCORE_RANGES),
                "d_k": draw(st.sampled_from((1, 2, 3, 4, 7, 16, 64))),
            }
        if op == "softmax":
            return op, {
                "scores": tensor(
                    draw, [T] if form == "row" else [T, draw(st.sampled_from(_TOKENS + _LONG_KEYS))], SCORE_RANGES
                )
            }
        if op == "blend":
            S = draw(st.sampled_from(_TOKENS + _LONG_KEYS))
            return op, {"weights": tensor(draw, [T, S], ((0.0, 1.0),)), "v": tensor(draw, [S, H], X_RANGES)}
        transposed = op in ("self_attention_v2", "exercise_3_1")  # nn.Linear's [d_out, d_in]
        if op in ("attention", "self_attention_v1", "self_attention_v2", "exercise_3_1", "causal_attention"):
            return op, {"x": x(), **{n: w(H, D) if transposed else w(D, H) for n in ("w_query", "w_key", "w_value")}}
        if op == "masked_attention":
            return op, {
                "x": x(),
                "w_query": w(D, H),
                "w_key": w(D, H),
                "w_value": w(D, H),
                "mask": mask(draw, [], T, T),
            }
        if op in ("decode_attention", "causal_flag", "cache_flag"):
            if draw(st.integers(0, 4)) == 4:  # a long cache, the last few queries
                T = draw(st.sampled_from(_LONG_CACHE))
                start = T - draw(st.integers(1, 4))
            else:
                start = draw(st.integers(0, T - 1))
            return op, {"x": x(t=T), "w_query": w(D, H), "w_key": w(D, H), "w_value": w(D, H), "start": start}
        if op in ("window_attention", "window_flag"):  # windows of one key, shorter than the sequence, and longer
            start = draw(st.integers(0, T - 1))
            window = draw(st.sampled_from((1, 2, 3, max(1, T // 2), T, T + 3)))
            weights = {"w_query": w(D, H), "w_key": w(D, H), "w_value": w(D, H)}
            return op, {"x": x(), **weights, "window": window, "start": start}
        if op in ("rotary_embedding", "fused_rotary"):  # both pairings, partial, far positions, each scaling
            R = 2 * draw(st.integers(1, max(1, D // 2)))
            if R > D:
                D = R
            return op, {
                "x": x(d=D),
                "pairing": draw(st.sampled_from(ops.CHOICES["pairing"])),
                "rotary_dim": R,
                "theta": draw(st.sampled_from((10000.0, 500000.0, 1e6, 100.0))),
                "position": draw(st.sampled_from((0, 1, 7, 255, 257, 1000, 4096, 32767, 131071))),
                "scaling": draw(st.sampled_from(ops.CHOICES["scaling"])),
                "factor": draw(st.sampled_from((1.0, 2.0, 4.0, 8.0, 32.0))),
            }
        if op == "scaled_rotary":  # each kind, both sides of dynamic's original length, YaRN truncated or not
            R = 2 * draw(st.integers(2, max(2, D // 2)))
            D = max(D, R)
            L0 = draw(st.sampled_from((16, 64, 2048, 4096, 32768)))
            position = draw(st.sampled_from((0, 7, L0 // 2, max(0, L0 - T), max(0, L0 - T + 1), L0, 4 * L0, 100000)))
            return op, {
                "x": x(d=D),
                "pairing": draw(st.sampled_from(ops.CHOICES["pairing"])),
                "rotary_dim": R,
                "theta": draw(st.sampled_from((10000.0, 150000.0, 500000.0, 1e6))),
                "position": position,
                "rope_type": draw(st.sampled_from(ops.CHOICES["rope_type"])),
                # a factor of 1 last: it scales nothing, and Hypothesis draws a list's first far more often
                "factor": draw(st.sampled_from((4.0, 8.0, 2.0, 32.0, 40.0, 1.0))),
                "original_max_positions": L0,
                "beta_fast": draw(st.sampled_from((32.0, 16.0))),
                "beta_slow": draw(st.sampled_from((1.0, 2.0))),
                "truncate": draw(st.booleans()),
            }
        if op in ("rotary_attention", "rotary_port"):  # heads of even width, each turned whole or in part
            N, half = draw(st.sampled_from((1, 2, 3, 4))), draw(st.sampled_from((1, 2, 4)))
            R = 2 * draw(st.integers(1, half))
            weights = {n: w(D, N * 2 * half) for n in ("w_query", "w_key", "w_value")}
            inputs = {"x": x(), **weights, "num_heads": N, "rotary_dim": R, "start": draw(st.integers(0, T - 1))}
            return op, inputs | (
                {"pairing": draw(st.sampled_from(ops.CHOICES["pairing"]))} if op == "rotary_attention" else {}
            )
        if op in ("softcap_attention", "softcap_flag"):  # no cap, caps that bend large scores, and tiny ones
            weights = {"w_query": w(D, H), "w_key": w(D, H), "w_value": w(D, H)}
            cap = draw(st.sampled_from((0.0, 0.5, 5.0, 30.0, 50.0)))
            return op, {"x": x(), **weights, "cap": cap, "causal": draw(st.booleans())}
        if op in ("sink_attention", "fused_sink_attention"):  # sinks beside, above and far above the scores
            N = draw(st.sampled_from((1, 2, 3, 4)))
            sinks = tensor(draw, [N], ((-3.0, 3.0), (5.0, 10.0), (-40.0, 40.0)))
            weights = {n: w(D, N * H) for n in ("w_query", "w_key", "w_value")}
            return op, {"x": x(), **weights, "sinks": sinks, "num_heads": N, "mask": mask(draw, lead, T, T)}
        if op in families.OPS:
            return op, families.draw_inputs(draw, op, T, D, H, lead, x, w, tensor, _TOKENS)
        if op in ("attention_stages", "scale_flag"):  # softcap's caps; scales of 1, 1/H, one sqrt cannot hold, tiny
            inputs = {"x": x(), "w_query": w(D, H), "w_key": w(D, H), "w_value": w(D, H), "causal": draw(st.booleans())}
            if op == "attention_stages":
                return op, inputs | {"cap": draw(st.sampled_from((0.0, 0.5, 5.0, 30.0, 50.0)))}
            return op, inputs | {"softmax_scale": draw(st.sampled_from((1.0, 1.0 / H, 0.1, 0.01, 2.0)))}
        if op == "key_padding_flag":  # each row's real keys, 1..T, the padding after them
            lengths = [draw(st.integers(1, T)) for _ in range(lead[0])]
            weights = {"w_query": w(D, H), "w_key": w(D, H), "w_value": w(D, H)}
            return op, {"x": x(), **weights, "padding": [[j >= n for j in range(T)] for n in lengths]}
        if (
            op == "decoder_attention"
        ):  # every family at once: grouped heads turned whole, a window, a cap, sinks or none
            (N, K), H = draw(st.sampled_from(((4, 2), (2, 1), (3, 3), (4, 1)))), 2 * draw(st.sampled_from((1, 2, 4)))
            sinks = tensor(draw, [N], ((-3.0, 3.0), (5.0, 10.0))) if draw(st.booleans()) else [-np.inf] * N
            return op, {
                "x": x(),
                "w_query": w(D, N * H),
                "w_key": w(D, K * H),
                "w_value": w(D, K * H),
                "num_heads": N,
                "num_kv_heads": K,
                "pairing": draw(st.sampled_from(ops.CHOICES["pairing"])),
                "window": draw(st.sampled_from((1, 2, 3, T, T + 3))),
                "cap": draw(st.sampled_from((0.0, 5.0, 50.0))),
                "sinks": sinks,
            }
        if op == "mask_conventions":
            return op, {
                "x": x(),
                "w_query": w(D, H),
                "w_key": w(D, H),
                "w_value": w(D, H),
                "mask": mask(draw, lead, T, T),
                "api": draw(st.sampled_from(ops.CHOICES["api"])),
                "fill": draw(st.sampled_from(ops.CHOICES["fill"])),
            }
        N = draw(st.sampled_from((1, 2, 3, 4)))
        if op in ("grouped_attention", "grouped_fused_attention", "grouped_attention_layer", "packed_fused_attention"):
            # (N, K) pairs, a third with 1 < K < N, where repeating and tiling K/V heads differ
            N, K = draw(st.sampled_from(((4, 2), (6, 3), (6, 2), (1, 1), (2, 1), (3, 3), (4, 1), (2, 2), (3, 1))))
            if op == "grouped_attention_layer":  # a layer: the model width is the input width
                D = N * H
            return op, {
                "x": x(d=D),
                "w_query": w(D, N * H),
                "w_key": w(D, K * H),
                "w_value": w(D, K * H),
                "num_heads": N,
                "num_kv_heads": K,
                "causal": draw(st.booleans()),
            }
        if op in ("multi_head_attention", "fused_attention"):
            inputs = {"x": x(), "w_query": w(D, N * H), "w_key": w(D, N * H), "w_value": w(D, N * H)}
            if op == "multi_head_attention":
                inputs["w_out"] = w(N * H, N * H)
            return op, inputs | {"num_heads": N, "causal": draw(st.booleans())}
        # The layers: model width E = N x H, weights in the reference form, biases drawn too.
        E = N * H
        inputs = {
            "x": x(d=E),
            **{n: w(E, E) for n in ("w_query", "w_key", "w_value", "w_out")},
            **{n: tensor(draw, [E], W_RANGES) for n in ("b_query", "b_key", "b_value", "b_out")},
            "num_heads": N,
        }
        if op == "attention_module":
            return op, inputs | {
                "causal": draw(st.booleans()),
                "layer": draw(st.sampled_from(ops.LAYERS)),
                "checkpoint": draw(st.sampled_from(ops.CHOICES["checkpoint"])),
            }
        if op == "layer_mask":
            return op, inputs | {"mask": mask(draw, lead, T, T)}
        padding = np.zeros(lead + [T], dtype=bool)
        padded = draw(st.integers(0, T - 1))
        if padded:
            padding[..., T - padded :] = True
        return op, inputs | {"padding": padding.tolist(), "causal": draw(st.booleans())}

    return case() if not words else case().map(lambda drawn: (drawn[0], drawn[1] | words))


def shares(op):
    """The parts an op's budget is split into: {} for an op without words; else each word of each of its word
    parameters held fixed in turn ({"checkpoint": "gpt2"}); a capped op's cases with no cap apart. Hypothesis draws
    a word list's first words far more often than its last: attention_module drew ("mha", "reference") 10 times in
    23 and never a GPT-2 checkpoint into another layer, at 2 seeds of 20, however large the budget (issue 58)."""
    params = ops.OPS[op][0]
    words = [{p: w} for p in params if ops.PARAMETERS.get(p) == "choice" for w in ops.CHOICES[p]]
    # A cap of 0 is no cap (conventions.softcap), a convention with its own bug (a library zeroed the logits): drawn as
    # often as the caps beside it, an adapter that zeroes them was found at 12 seeds of 20 (jax__softcap_zero_...).
    off = [{}, {"cap": 0.0}] if "cap" in params and not words else []
    return words or off or [{}]
