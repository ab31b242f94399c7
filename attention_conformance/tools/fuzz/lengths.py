"""Drawing cases at a model's own lengths (issue 73): a decode step over tens of thousands of keys, a prefill of a
thousand queries and more, softmax rows as long, each length a power of two (every tile divides it) or one past one
(a last tile of one key). They are their op's long share, searched after its budget (search.Fuzzer.run): left among
cases.py's sizes, a length Hypothesis draws last and shrinks away first would be drawn at almost no seed."""

from attention_conformance.tools.fuzz import cases, families

OPS = ("softmax", "decode_paths", "sink_decode_paths")
SHARE = 5  # an op of OPS draws one long case for every SHARE cases of its budget, and one at least

# Hypothesis's first draw is the simplest (each list's first entry), and with a budget of one or two long draws (the
# self-checks') it is the only one: so the longest come first, one past a power of two (a last tile of one key).
KEYS = (65537, 4097, 16385, 32769, 8193, 4096, 16384, 65536)  # a decode step's cache
QUERIES = (2049, 1025, 2048, 1024)  # a prefill's tokens, each query over the keys up to its own
# The float64 oracle's cost per draw (its three passes: exact, plain, bound), measured with the torch adapter on 2 cores
# (Intel Xeon): a decode grows with keys x query heads x head size (each head's keys are split exactly for its products,
# deterministic.matmul): 65,537 x 4 x 64 took 6.7 s, 16,384 x 8 x 128 took 9.6 s; a prefill with the scores, queries x
# keys x query heads: 1,024 x 1,024 x 4 at head size 64 took 1.0 s, 2,049 x 2,049 x 1 at 8 took 0.9 s. A draw stays
# under these, about a second, and the heads that fit are offered the costliest first (multi-query after the rest:
# Keras raises on it, declared, and a self-check's one long draw would judge nothing there).
DECODE_COST = 2**21
PREFILL_COST = 5 * 2**20
PREFILL_HEAD_SIZES = (64, 8, 3, 1)


def count(op, examples):
    """The long draws of `op` beside a budget of `examples`: none for an op outside OPS."""
    return max(1, examples // SHARE) if op in OPS else 0


def strategy(op):
    """Long cases of `op` (one of OPS), in the spec's vocabulary: seeded uniform tensors, as cases.strategy draws."""
    from hypothesis import strategies as st

    def tensor(draw, shape, ranges):
        low, high = draw(st.sampled_from(ranges))
        return {"uniform": [low, high], "shape": list(shape), "seed": draw(st.integers(0, 2**16))}

    @st.composite
    def case(draw):
        if op == "softmax":
            S = draw(st.sampled_from(KEYS))
            shape = [S] if draw(st.booleans()) else [draw(st.sampled_from((2, 3))), S]
            return op, {"scores": tensor(draw, shape, cases.SCORE_RANGES)}
        prefill = draw(st.integers(0, 3)) == 3  # a quarter of the draws a whole prefill, the rest a decode step
        T = draw(st.sampled_from(QUERIES if prefill else KEYS))
        fits = [
            (N, K, H)
            for N, K in families.PATH_GROUPS
            for H in (PREFILL_HEAD_SIZES if prefill else families.PATH_HEADS)
            if (T * T * N <= PREFILL_COST if prefill else T * N * H <= DECODE_COST)
        ]
        N, K, H = draw(st.sampled_from(sorted(fits, key=lambda nkh: (-nkh[0] * nkh[2], nkh[1] == 1))))
        D = draw(st.sampled_from((3, 8, 16)))
        inputs = {
            "x": tensor(draw, [1, T, D], cases.X_RANGES),
            "w_query": tensor(draw, [D, N * H], cases.W_RANGES),
            "w_key": tensor(draw, [D, K * H], cases.W_RANGES),
            "w_value": tensor(draw, [D, K * H], cases.W_RANGES),
            "num_heads": N,
            "num_kv_heads": K,
            "start": 0 if prefill else T - draw(st.integers(1, 4)),
        }
        if op == "sink_decode_paths":
            inputs["sinks"] = tensor(draw, [N], families.SINK_RANGES)
        return op, inputs

    return case()
