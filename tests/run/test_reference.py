"""The oracle is tested too: its analytic gradients against central finite differences in float64, and RoPE by
what defines it."""

import numpy as np
import pytest

from attention_conformance.adapters import reference
from attention_conformance.cases.golden import Goldens

EPS = 1e-6  # central differences: truncation ~EPS^2, rounding ~1e-16 / EPS; both near 1e-10 here


def _loss(x, w_query, w_key, w_value, g):
    return float((reference.attention(x, w_query, w_key, w_value)["context"] * g).sum())


def _finite_differences(args, index, g):
    grad = np.zeros_like(args[index])
    for position in np.ndindex(grad.shape):
        up, down = [a.copy() for a in args], [a.copy() for a in args]
        up[index][position] += EPS
        down[index][position] -= EPS
        grad[position] = (_loss(*up, g) - _loss(*down, g)) / (2 * EPS)
    return grad


@pytest.mark.parametrize("golden_file", ["doc000_seed123.json", "batched_cube.json"])
def test_analytic_gradients_match_finite_differences(golden_file):
    data = Goldens().file(golden_file)
    args = [data[name].astype(np.float64) for name in ("x", "w_query", "w_key", "w_value")]
    g = data["g"].astype(np.float64)
    analytic = reference.gradients(*args, g, "v1")
    for index, name in ((1, "grad_w_query"), (2, "grad_w_key"), (3, "grad_w_value"), (0, "grad_x")):
        numeric = _finite_differences(args, index, g)
        assert np.abs(analytic[name] - numeric).max() < 1e-8, name


def test_v2_gradients_are_v1_gradients_in_linear_layout():
    data = Goldens().file("doc000_seed789_v2.json")
    weights = [data[w].astype(np.float64) for w in ("w_query", "w_key", "w_value")]
    v2 = reference.gradients(data["x"], *weights, data["g"], "v2")
    v1 = reference.gradients(data["x"], *(w.T for w in weights), data["g"], "v1")
    for name in ("grad_w_query", "grad_w_key", "grad_w_value"):
        assert np.array_equal(v2[name], v1[name].T)
    assert np.array_equal(v2["grad_x"], v1["grad_x"])


def test_sgd_step_moves_against_the_gradient_and_lowers_the_loss():
    data = Goldens().file("doc000_seed123.json")
    weights = [data[w].astype(np.float64) for w in ("w_query", "w_key", "w_value")]
    stepped = reference.sgd_step(data["x"], *weights, data["g"], 0.1)
    grads = reference.gradients(data["x"], *weights, data["g"], "v1")
    for w, name in zip(weights, ("query", "key", "value")):
        assert np.allclose(stepped[f"w_{name}"], w - 0.1 * grads[f"grad_w_{name}"], rtol=0, atol=1e-15)
    assert _loss(data["x"], *stepped.values(), data["g"]) < _loss(data["x"], *weights, data["g"])


def test_softmax_rows_sum_to_one_and_survive_huge_scores():
    scores = np.array([[1000.0, -1000.0, 999.0], [0.0, 0.0, 0.0]])
    weights = reference.softmax(scores)
    assert np.all(np.isfinite(weights))
    assert np.allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-15)
    assert np.allclose(weights[1], 1 / 3, rtol=0, atol=1e-16)


@pytest.mark.parametrize("pairing", ["interleaved", "rotate_half"])
def test_rotary_scores_depend_only_on_the_distance_between_positions(pairing):
    """RoFormer's point (eq. 16): q at m and k at n score as q at m + s and k at n + s; and the pairs turn, so
    each pair's length is kept."""
    rng = np.random.default_rng(5)
    q, k = rng.uniform(-1, 1, (1, 1, 8)), rng.uniform(-1, 1, (1, 1, 8))

    def score(m, n):
        turned = [reference.rotary_embedding(t, pairing, 8, 10000.0, p, "none", 1.0) for t, p in ((q, m), (k, n))]
        return float((turned[0] * turned[1]).sum())

    assert score(3, 7) == pytest.approx(score(103, 107), abs=1e-12) != pytest.approx(score(3, 8), abs=1e-6)
    turned = reference.rotary_embedding(q, pairing, 8, 10000.0, 41, "none", 1.0)
    halves = (q[..., 0::2], q[..., 1::2]) if pairing == "interleaved" else (q[..., :4], q[..., 4:])
    turned_halves = (
        (turned[..., 0::2], turned[..., 1::2]) if pairing == "interleaved" else (turned[..., :4], turned[..., 4:])
    )
    assert np.hypot(*turned_halves) == pytest.approx(np.hypot(*halves), abs=1e-14)


def test_the_two_pairings_are_one_permutation_apart_and_the_dims_past_rotary_dim_stay():
    rng = np.random.default_rng(6)
    x = rng.uniform(-1, 1, (2, 5, 12))
    to_halves = np.r_[0:8:2, 1:8:2, 8:12]  # pairs (2i, 2i+1) of the first 8 dims to (i, i + 4)
    interleaved = reference.rotary_embedding(x, "interleaved", 8, 500000.0, 9, "llama3", 8.0)
    rotate_half = reference.rotary_embedding(x[..., to_halves], "rotate_half", 8, 500000.0, 9, "llama3", 8.0)
    assert np.array_equal(interleaved[..., to_halves], rotate_half)
    assert np.array_equal(interleaved[..., 8:], x[..., 8:])


def test_a_capped_score_stays_within_the_cap_and_a_hidden_key_weighs_nothing():
    rng = np.random.default_rng(7)
    x, *w = (rng.uniform(-4, 4, shape) for shape in ((1, 6, 8), (8, 8), (8, 8), (8, 8)))
    capped = reference.softcap_attention(x, *w, cap=1.0, causal=True)["weights"]
    plain = reference.causal_attention(x, *w)["weights"]
    assert (capped[0][np.triu_indices(6, 1)] == 0).all()
    for i in range(6):  # scores within 1 of 0: of i + 1 keys, none weighs more than e^2 / (e^2 + i)
        assert capped[0, i].max() <= np.e**2 / (np.e**2 + i) + 1e-12
    assert np.array_equal(reference.softcap_attention(x, *w, cap=0.0, causal=True)["weights"], plain)


def test_a_sink_takes_what_the_keys_leave_and_all_of_a_row_with_none():
    rng = np.random.default_rng(8)
    x, *w = (rng.uniform(-1, 1, shape) for shape in ((1, 4, 8), (8, 8), (8, 8), (8, 8)))
    mask = np.zeros((1, 4, 4), dtype=bool)
    mask[0, 2] = True  # query 2 sees no key
    sinks = np.array([1.5, -0.5])
    out = reference.sink_attention(x, *w, sinks=sinks, num_heads=2, mask=mask)
    rows = out["weights"].sum(axis=-1)  # [1, N, T]
    assert (rows < 1).all() and (out["weights"][0, :, 2] == 0).all() and (out["context"][0, 2] == 0).all()
    scores = reference.scale(reference.transposed_matmul(x @ w[0][:, :4], x @ w[1][:, :4]), 4)[0, 0]
    assert rows[0, 0, 0] == pytest.approx(np.exp(scores).sum() / (np.exp(scores).sum() + np.exp(1.5)), abs=1e-14)


def test_alibi_slopes_are_the_papers_sequence_and_blooms_rule_past_a_power_of_two():
    # 8 heads: 1/2 .. 1/256 (the paper); 12: those eight, then every other slope of 16 heads, 2^-0.5, 2^-1.5, ..
    assert np.array_equal(reference.alibi_slopes(8), 2.0 ** -np.arange(1, 9))
    assert reference.alibi_slopes(12)[8:] == pytest.approx(2.0 ** -np.array([0.5, 1.5, 2.5, 3.5]), rel=1e-15)
    assert np.array_equal(reference.alibi_slopes(12)[:8], reference.alibi_slopes(8))
    assert np.array_equal(reference.alibi_slopes(16)[1::2], reference.alibi_slopes(8))
    assert np.array_equal(reference.alibi_slopes(1), [2.0**-8])


def test_alibi_is_the_scores_plus_slope_times_key_minus_query_and_blooms_key_offset_weighs_the_same():
    rng = np.random.default_rng(9)
    x, *w = (rng.uniform(-1, 1, shape) for shape in ((1, 5, 8), (8, 8), (8, 8), (8, 8)))
    out = reference.alibi_attention(x, *w, num_heads=2, causal=True)
    slopes, j = reference.alibi_slopes(2), np.arange(5)
    for n in range(2):
        scores = reference.scale(
            reference.transposed_matmul(x @ w[0][:, 4 * n : 4 * n + 4], x @ w[1][:, 4 * n :][:, :4]), 4
        )[0]
        for i in range(5):
            past = scores[i, : i + 1] + slopes[n] * (j[: i + 1] - i)
            key_only = scores[i, : i + 1] + slopes[n] * j[: i + 1]  # BLOOM's offset: a constant a row
            for biased in (past, key_only):
                expected = np.exp(biased - biased.max()) / np.exp(biased - biased.max()).sum()
                assert out["weights"][0, n, i, : i + 1] == pytest.approx(expected, abs=1e-14)
            assert (out["weights"][0, n, i, i + 1 :] == 0).all()
    unmasked = reference.alibi_attention(x, *w, num_heads=2, causal=False)["weights"]
    assert not np.allclose(unmasked, out["weights"])  # without the mask, later keys weigh something


def test_qk_norm_is_rmsnorm_before_the_rotation_per_head_or_over_the_projection():
    rng = np.random.default_rng(10)
    x, *w = (rng.uniform(-1, 1, shape) for shape in ((1, 3, 4), (4, 8), (4, 8), (4, 8)))
    gain = rng.uniform(0.5, 1.5, 4)
    out = reference.qk_norm_attention(
        x, *w, num_heads=2, norm_weight_q=gain, norm_weight_k=gain, eps=0.01, per_head=True, causal=True
    )
    q = x[0] @ w[0][:, 4:]  # head 1, eps inside the root, then times the weight, then turned
    normed = q / np.sqrt((q * q).mean(axis=-1, keepdims=True) + 0.01) * gain
    assert out["queries"][0, 1, 0] == pytest.approx(normed[0], abs=1e-14)  # position 0: not turned
    assert np.linalg.norm(out["queries"][0, 1, 2]) == pytest.approx(np.linalg.norm(normed[2]), abs=1e-14)
    assert not np.allclose(out["queries"][0, 1, 2], normed[2])  # position 2: turned, its length kept
    whole = reference.qk_norm_attention(
        x,
        *w,
        num_heads=2,
        norm_weight_q=np.tile(gain, 2),
        norm_weight_k=np.tile(gain, 2),
        eps=0.01,
        per_head=False,
        causal=True,
    )
    q = x[0] @ w[0]
    assert whole["queries"][0, 1, 0] == pytest.approx(
        (q / np.sqrt((q * q).mean(-1, keepdims=True) + 0.01))[0, 4:] * gain
    )
    assert (out["weights"][0, :, 0, 1:] == 0).all()


def test_decode_paths_are_rows_of_the_causal_pass_and_a_sink_of_minus_infinity_is_none():
    rng = np.random.default_rng(11)
    x, w_query, w_key, w_value = (rng.uniform(-1, 1, shape) for shape in ((2, 7, 4), (4, 8), (4, 4), (4, 4)))
    causal = reference.grouped_attention(x, w_query, w_key, w_value, num_heads=4, num_kv_heads=2, causal=True)
    for start in (0, 3, 6):
        out = reference.decode_paths(x, w_query, w_key, w_value, num_heads=4, num_kv_heads=2, start=start)
        assert np.array_equal(out["batched"], causal[..., start:, :]) and np.array_equal(out["alone"], out["batched"])
    sunk = reference.sink_decode_paths(x, w_query, w_key, w_value, 4, 2, [-np.inf] * 4, start=3)["alone"]
    assert np.array_equal(sunk, causal[..., 3:, :])
    # A sink takes a share of every row: the first query's one key then weighs less than 1, so its context shrinks.
    first = reference.sink_decode_paths(x, w_query, w_key, w_value, 4, 2, [0.0, 1.0, 2.0, 3.0], start=0)["alone"]
    assert np.all(np.abs(first[..., 0, :]) < np.abs(causal[..., 0, :]))


def test_cross_attention_queries_x_over_the_memory_its_padding_hidden_from_every_query():
    rng = np.random.default_rng(11)
    x, memory, *w = (rng.uniform(-1, 1, shape) for shape in ((2, 3, 4), (2, 5, 4), (4, 4), (4, 4), (4, 4)))
    padding = np.array([[False] * 5, [False, False, True, True, True]])
    out = reference.cross_attention(x, memory, *w, num_heads=2, padding=padding)
    assert out["weights"].shape == (2, 2, 3, 5) and (out["weights"][1, :, :, 2:] == 0).all()
    q, k, v = x[1] @ w[0][:, 2:], memory[1, :2] @ w[1][:, 2:], memory[1, :2] @ w[2][:, 2:]  # head 1, real keys
    s = q @ k.T / np.sqrt(2)
    weights = np.exp(s - s.max(-1, keepdims=True)) / np.exp(s - s.max(-1, keepdims=True)).sum(-1, keepdims=True)
    assert out["context"][1, :, 2:] == pytest.approx(weights @ v, abs=1e-14)
    empty = reference.cross_attention(x, memory, *w, num_heads=2, padding=np.ones((2, 5), bool))
    assert (empty["context"] == 0).all()  # conventions.fully_masked_rows


def test_t5_buckets_are_the_exact_floor_where_float_code_disagrees_and_t5s_own_elsewhere():
    from attention_conformance.adapters.reference.cross import _t5_bucket, _t5_ties

    # T5's encoder (32 buckets, 128): 0 for the query itself, 1..7 exact behind it, 17..23 after it, then logarithmic.
    row = reference.t5_relative_bias(1, 20, 32, 128, True)[0]
    assert row[:8].tolist() == [0, 17, 18, 19, 20, 21, 22, 23] and row[8:].max() <= 31
    assert reference.t5_relative_bias(20, 1, 32, 128, False)[:, 0].tolist()[:17] == list(range(16)) + [16]
    assert (reference.t5_relative_bias(1, 5, 32, 128, False) == 0).all()  # a decoder's later keys: bucket 0
    # distance 16 at 32 buckets and 128, bidirectional: log(16 / 8) / log(16) * 8 = 2 exactly, bucket 8 + 2 = 10 a side
    assert _t5_bucket(-16, 32, 128, True) == 10 and _t5_ties(32, 128, True, 100) == [16, 32, 64]
    # a tie the search found torch's float32 code missing (26 there): 72 buckets, 50, distance 30
    assert _t5_bucket(-30, 72, 50, True) == 27 and 30 in _t5_ties(72, 50, True, 40)
    with pytest.raises(ValueError, match="max_distance"):
        reference.t5_relative_bias(2, 2, 32, 8, True)


def test_the_spec_t5_cases_keep_clear_of_ties():
    from attention_conformance.adapters.reference.cross import _t5_ties
    from attention_conformance.cases import loader

    for case in loader.load().cases.values():
        if case.op in ("t5_relative_bias", "t5_attention"):
            i = case.inputs
            T, S = (i["query_length"], i["key_length"]) if case.op == "t5_relative_bias" else (i["x"]["shape"][-2],) * 2
            assert not _t5_ties(i["num_buckets"], i["max_distance"], i["bidirectional"], max(T, S) - 1), case.id


def test_ntk_aware_divides_the_lowest_frequency_by_the_factor_and_keeps_the_highest():
    # theta factor^(R/(R-2)) raised to -(R-2)/R, the last pair's exponent: theta^(-(R-2)/R) / factor
    f = reference.rope_frequencies(8, 10000.0, "ntk", 4.0, 64, 32.0, 1.0, True, 1)["frequencies"]
    assert f[0] == 1.0 and f[-1] == pytest.approx(10000.0 ** (-6 / 8) / 4, rel=1e-15)


def test_dynamic_ntk_keeps_ropes_frequencies_up_to_the_original_length_and_scales_past_it():
    def table(length):
        return reference.rope_frequencies(8, 10000.0, "dynamic", 4.0, 64, 32.0, 1.0, True, length)["frequencies"]

    plain = 10000.0 ** (-np.arange(0, 8, 2) / 8)
    assert table(1) == pytest.approx(plain, rel=1e-15) and table(64) == pytest.approx(plain, rel=1e-15)
    s = 4.0 * 65 / 64 - 3  # one past L0
    assert table(65) == pytest.approx((10000.0 * s ** (8 / 6)) ** (-np.arange(0, 8, 2) / 8), rel=1e-14)
    # scaled_rotary measures the sequence by its last position + 1: one token at position 64 is 65 long
    x = np.ones((1, 1, 8))
    assert not np.allclose(
        reference.scaled_rotary(x, "rotate_half", 8, 10000.0, 64, "dynamic", 4.0, 64, 32.0, 1.0, True),
        reference.rotary_embedding(x, "rotate_half", 8, 10000.0, 64, "none", 1.0),
    )


def test_yarn_ramps_between_the_frequencies_and_them_over_the_factor_and_lengthens_cos_and_sin():
    # Qwen2.5's config: low = floor(23.6) = 23, high = ceil(39.65) = 40 of 64 pairs
    out = reference.rope_frequencies(128, 1e6, "yarn", 4.0, 32768, 32.0, 1.0, True, 1)
    plain = np.array([1e6 ** (-2 * i / 128) for i in range(64)])
    assert out["frequencies"][:24] == pytest.approx(plain[:24], rel=1e-14)
    assert out["frequencies"][40:] == pytest.approx(plain[40:] / 4, rel=1e-14)
    share = (30 - 23) / (40 - 23)
    assert out["frequencies"][30] == pytest.approx(plain[30] / 4 * share + plain[30] * (1 - share), rel=1e-14)
    assert out["attention_factor"] == pytest.approx(0.1 * np.log(4) + 1, rel=1e-15)
    # at position 0 every angle is 0: the rotated row is x times the attention factor
    x = np.linspace(-1, 1, 16).reshape(1, 1, 16)
    turned = reference.scaled_rotary(x, "interleaved", 16, 10000.0, 0, "yarn", 8.0, 2048, 32.0, 1.0, False)
    assert turned == pytest.approx(x * (0.1 * np.log(8) + 1), rel=1e-15)


def test_scale_flag_is_beyond_float16s_range_where_the_unscaled_product_is():
    # Its route scales q and k by sqrt(scale) first, so its own scores stay in range; Keras stores q k^T in float16
    # first and returned NaN (fuzz, seed 0). Scores of 2.56e6 at a scale of 1e-3: the range, not rounding.
    from attention_conformance.run import tolerance_model

    x, w = np.ones((1, 2, 4)), np.full((4, 4), 200.0)
    with pytest.raises(tolerance_model.Overflow):
        tolerance_model.bound("float16", reference.scale_flag, x, w, w, w, softmax_scale=1e-3, causal=False)
    within = tolerance_model.bound(
        "float16", reference.scale_flag, x, w / 8, w / 8, w, softmax_scale=1e-3, causal=False
    )
    assert np.isfinite(within).all()
