"""`explain` on QK-norm and RoPE scaling (tools/qk.py): a float32 kernel written here from the published
formulas (transformers' RMSNorm and rope_utils, Llama 3.1's config) is judged within; each wrong side a port takes
is named (tools/conventions.py's before_the_scores); the keys' mistakes are refused naming the key."""

import numpy as np
import pytest
from explained import explained, float32_stages

from attention_conformance.adapters import reference
from attention_conformance.dtypes import np_dtype
from attention_conformance.tools.explain import forms

N, T, H, R = 2, 8, 16, 16
CAUSAL = np.triu(np.ones((T, T), bool), 1)


def _rms(t, weight, eps, outside=False, over_heads=False):
    """float32 RMSNorm over the last axis, or over all heads' dims of [.., N, T, H] at once."""
    axes = (-3, -1) if over_heads else (-1,)
    mean_square = (t * t).mean(axis=axes, keepdims=True, dtype=np.float32)
    root = np.sqrt(mean_square) + np.float32(eps) if outside else np.sqrt(mean_square + np.float32(eps))
    return (t / root * weight).astype(np.float32)


def _turned(t, frequencies, positions, attention_factor=1.0):
    """rotate_half RoPE in float32 over the first len(frequencies) * 2 dims."""
    angles = positions[:, None].astype(np.float32) * frequencies.astype(np.float32)
    cos, sin = np.cos(angles) * np.float32(attention_factor), np.sin(angles) * np.float32(attention_factor)
    half = len(frequencies)
    a, b, rest = t[..., :half], t[..., half : 2 * half], t[..., 2 * half :]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos, rest], axis=-1).astype(np.float32)


def _frequencies(R=R, theta=10000.0, base=None):
    return (theta if base is None else base) ** (-np.arange(0, R, 2) / R)


# --- QK-norm -------------------------------------------------------------------------------------------------------


def _normed_attention(over_heads=False, after_rope=False, one_plus=False, outside=False, skip=False, swap=False):
    """q, k, v [1, N, T, H] before the norm, the norm's weights, and out of causal attention in float32 as a kernel
    computes it: RMSNorm (eps 1e-6) before RoPE, per head or over the projection; or one of the knobs' mistakes."""
    rng = np.random.default_rng(11)
    q, k, v = (rng.standard_normal((1, N, T, H)).astype(np.float32) for _ in range(3))
    q, k = q * np.float32(1e-3), k * np.float32(1e-3)  # small, so eps counts where it stands
    size = N * H if over_heads else H
    w_q, w_k = (rng.uniform(0.5, 1.5, size).astype(np.float32) for _ in range(2))
    used = (w_k, w_q) if swap else (w_q, w_k)
    used = tuple(w + np.float32(1) for w in used) if one_plus else used
    shaped = tuple(np.reshape(w, (N, 1, H)) if over_heads else w for w in used)
    norm = (lambda t, w: t) if skip else (lambda t, w: _rms(t, w, 1e-6, outside, over_heads))
    positions = np.arange(T)
    if after_rope:
        qr, kr = (norm(_turned(t, _frequencies(), positions), w) for t, w in ((q, shaped[0]), (k, shaped[1])))
    else:
        qr, kr = (_turned(norm(t, w), _frequencies(), positions) for t, w in ((q, shaped[0]), (k, shaped[1])))
    given = dict(q=q, k=k, v=v, num_kv_heads=np.array(N), causal=np.array(True), pairing=np.array("rotate_half"))
    given |= dict(norm_weight_q=w_q, norm_weight_k=w_k, eps=np.array(1e-6))
    return given, qr, float32_stages(qr, kr, v, CAUSAL)["out"]


@pytest.mark.parametrize("over_heads", [False, True], ids=["per head", "over the projection"])
def test_qk_norm_computed_as_published_is_within(tmp_path, over_heads):
    given, q_rotated, out = _normed_attention(over_heads=over_heads)
    code, text = explained(tmp_path, **given, q_rotated=q_rotated, out=out)
    where = "over the projection" if over_heads else "per head"
    assert code == 0 and f"QK-norm {where}" in text and "rounding, not a bug" in text, text


def test_the_oracle_s_qk_norm_op_is_explain_s_statement(tmp_path):
    """reference.qk_norm_attention's queries and context (over the projection), given as x and the weights in
    bfloat16, judged within."""
    bf16 = lambda a: np.asarray(a, np.float32).astype(np_dtype("bfloat16")).astype(np.float64)  # noqa: E731
    rng = np.random.default_rng(2)
    x, w_q, w_k = (
        bf16(rng.standard_normal((1, T, 12))),
        bf16(rng.uniform(0.5, 1.5, N * H)),
        bf16(rng.uniform(0.5, 1.5, N * H)),
    )
    w = [bf16(rng.uniform(-0.5, 0.5, (12, N * H))) for _ in range(3)]
    found = reference.qk_norm_attention(x, *w, N, w_q, w_k, 1e-6, False, True)
    per_head = np.swapaxes(np.reshape(found["context"], (1, T, N, H)), 1, 2)
    given = dict(x=x, w_query=w[0], w_key=w[1], w_value=w[2], num_heads=np.array(N), causal=np.array(True))
    given |= dict(pairing=np.array("rotate_half"), norm_weight_q=w_q, norm_weight_k=w_k, eps=np.array(1e-6))
    stages = dict(q_rotated=bf16(found["queries"]), out=bf16(per_head), dtype=np.array("bfloat16"))
    code, text = explained(tmp_path, **given, **stages)
    assert code == 0 and "over the projection" in text and "rounding, not a bug" in text, text


@pytest.mark.parametrize(
    "wrong, named",
    [
        (dict(after_rope=True), "QK-norm after RoPE"),
        (dict(skip=True), "no QK-norm"),
        (dict(one_plus=True), "the norm's weight as Gemma's 1 + w"),
        (dict(outside=True), "eps outside the root"),
        (dict(swap=True), "the norm weights swapped"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_each_qk_norm_mistake_is_named(tmp_path, wrong, named):
    given, _, out = _normed_attention(**wrong)
    code, text = explained(tmp_path, **given, out=out)
    assert code == 1 and f"matches a known difference: {named}" in text, text


def test_an_l2_norm_in_place_of_an_rms_norm_is_named(tmp_path):
    """Llama 4's Llama4TextL2Norm is an RMS norm; a port taking its name at its word divides by the length, sqrt(H)
    times more (F.normalize)."""
    given, _, _ = _normed_attention()
    length = lambda t: np.sqrt((t * t).sum(axis=-1, keepdims=True, dtype=np.float32))  # noqa: E731
    qr, kr = (_turned((given[t] / length(given[t]) * given[w]).astype(np.float32), _frequencies(), np.arange(T))
              for t, w in (("q", "norm_weight_q"), ("k", "norm_weight_k")))  # fmt: skip
    code, text = explained(tmp_path, **given, out=float32_stages(qr, kr, given["v"], CAUSAL)["out"])
    assert code == 1 and "matches a known difference: an L2 norm, x / ||x||" in text, text


def test_another_model_s_eps_is_named(tmp_path):
    """The trial's: the kernel's eps 1e-5 (Llama's rms_norm_eps), where the file says 1e-6."""
    given, _, _ = _normed_attention()
    qr, kr = (_turned(_rms(given[t], given[w], 1e-5), _frequencies(), np.arange(T)) for t, w in
              (("q", "norm_weight_q"), ("k", "norm_weight_k")))  # fmt: skip
    code, text = explained(tmp_path, **given, out=float32_stages(qr, kr, given["v"], CAUSAL)["out"])
    assert code == 1 and "matches a known difference: QK-norm's eps 1e-05" in text, text


def test_per_head_weights_normed_over_the_projection_are_named(tmp_path):
    """The file's [H] weights per head; the kernel normed the projection with them tiled to each head (OLMo 2's)."""
    given, _, _ = _normed_attention()
    w_q, w_k = (np.tile(given[n], N).reshape(N, 1, H) for n in ("norm_weight_q", "norm_weight_k"))
    qr, kr = (_turned(_rms(given[t], w, 1e-6, over_heads=True), _frequencies(), np.arange(T)) for t, w in
              (("q", w_q), ("k", w_k)))  # fmt: skip
    code, text = explained(tmp_path, **given, out=float32_stages(qr, kr, given["v"], CAUSAL)["out"])
    assert code == 1 and "matches a known difference: QK-norm over the whole projection" in text, text


def test_projection_weights_normed_per_head_are_named(tmp_path):
    given, _, _ = _normed_attention(over_heads=True)
    w_q, w_k = (given[n].reshape(N, 1, H) for n in ("norm_weight_q", "norm_weight_k"))
    qr, kr = (_turned(_rms(given[t], w, 1e-6), _frequencies(), np.arange(T)) for t, w in (("q", w_q), ("k", w_k)))
    code, text = explained(tmp_path, **given, out=float32_stages(qr, kr, given["v"], CAUSAL)["out"])
    assert code == 1 and "matches a known difference: QK-norm per head" in text, text


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(norm_weight_q=np.ones(5)), "norm_weight_q \\[5\\], norm_weight_k \\[16\\], eps 1e-06: QK-norm's weights"),
        (dict(eps=np.array(-1.0)), "eps -1.0: QK-norm's weights"),
        (dict(norm_weight_q=np.array(["a"] * 16)), "QK-norm's weights are numbers"),
    ],
    ids=["a weight's size", "eps", "strings"],
)
def test_qk_norm_keys_that_do_not_fit_are_refused_naming_them(tmp_path, change, message):
    given, _, out = _normed_attention()
    with pytest.raises(forms.BadInput, match=message):
        explained(tmp_path, **(given | change), out=out)


def test_a_missing_norm_weight_is_said_missing(tmp_path):
    given, _, out = _normed_attention()
    del given["norm_weight_k"]
    with pytest.raises(forms.BadInput, match="QK-norm without norm_weight_k: give norm_weight_q and"):
        explained(tmp_path, **given, out=out)


# --- RoPE scaling --------------------------------------------------------------------------------------------------

S = 64  # past L0 = 32: dynamic's base grows, YaRN's and the others' frequencies change what 64 positions show
L0, FACTOR = 32, 4.0


def _published(kind, R=R, length=S, truncate=True, attention=True, exponent_dims=None, factor_one=False):
    """(frequencies, attention factor) from the published formulas (spec conventions.rope_scaling's quotes)."""
    f, factor = _frequencies(R), 1.0
    if kind in ("ntk", "dynamic"):
        s = FACTOR if kind == "ntk" else FACTOR * max(length, L0) / L0 - (FACTOR - 1)
        dims = exponent_dims or R
        f = _frequencies(R, base=10000.0 * s ** (dims / (dims - 2)))
    elif kind == "linear":
        f = f if factor_one else f / FACTOR
    elif kind == "llama3":
        wavelength = 2 * np.pi / f
        smooth = (8192 / wavelength - 1) / 3
        f = np.where(
            wavelength < 2048, f, np.where(wavelength > 8192, f / FACTOR, (1 - smooth) * f / FACTOR + smooth * f)
        )
    elif kind == "yarn":
        dim = lambda beta: R * np.log(L0 / (beta * 2 * np.pi)) / (2 * np.log(10000.0))  # noqa: E731
        low, high = dim(32.0), dim(1.0)
        low, high = (np.floor(low), np.ceil(high)) if truncate else (low, high)
        low, high = max(low, 0), min(high, R - 1)
        ramp = np.clip((np.arange(R // 2) - low) / (high - low), 0, 1)
        f = f / FACTOR * ramp + f * (1 - ramp)
        factor = 0.1 * np.log(FACTOR) + 1 if attention else 1.0
    return f, factor


def _scaled_file(kind, rotary_dim=R, **wrong):
    """q, k, v [1, S, H] before RoPE with `kind`'s scaling stated, and out of causal attention in float32."""
    rng = np.random.default_rng(19)
    q, k, v = (rng.standard_normal((1, S, H)).astype(np.float32) for _ in range(3))
    f, factor = _published(kind, rotary_dim, **wrong)
    qr, kr = (_turned(t, f, np.arange(S), factor) for t in (q, k))
    given = dict(q=q, k=k, v=v, causal=np.array(True), pairing=np.array("rotate_half"), rotary_dim=np.array(rotary_dim))
    given |= dict(rope_type=np.array(kind), factor=np.array(FACTOR))
    if kind in ("dynamic", "yarn"):
        given["original_max_positions"] = np.array(L0)
    return given, float32_stages(qr, kr, v, np.triu(np.ones((S, S), bool), 1))["out"]


@pytest.mark.parametrize("kind", ["linear", "llama3", "ntk", "dynamic", "yarn"])
def test_rope_scaling_computed_as_published_is_within(tmp_path, kind):
    given, out = _scaled_file(kind)
    code, text = explained(tmp_path, **given, out=out)
    assert code == 0 and f"scaled {kind} x4" in text, text


@pytest.mark.parametrize(
    "kind, rotary_dim, wrong, named",
    [
        ("yarn", R, dict(attention=False), "YaRN without its attention factor"),
        ("yarn", R, dict(truncate=False), "YaRN's ramp ends kept fractional"),
        ("dynamic", R, dict(length=int(L0 * FACTOR)), "dynamic NTK's base at L0 x factor"),
        ("ntk", 8, dict(exponent_dims=H), "NTK's exponent on the head size"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_each_rope_scaling_mistake_is_named(tmp_path, kind, rotary_dim, wrong, named):
    given, out = _scaled_file(kind, rotary_dim, **wrong)
    code, text = explained(tmp_path, **given, out=out)
    assert code == 1 and f"matches a known difference: {named}" in text, text


@pytest.mark.parametrize(
    "stated, computed, named",
    [
        ("yarn", None, "no RoPE scaling"),
        ("llama3", "linear", "linear scaling for llama3's"),
        ("dynamic", "ntk", "NTK-aware's fixed base for dynamic's"),
    ],
)
def test_the_scaling_taken_for_another_is_named(tmp_path, stated, computed, named):
    given, _ = _scaled_file(stated)
    out = _scaled_file(computed)[1] if computed else _scaled_file("linear", factor_one=True)[1]
    code, text = explained(tmp_path, **given, out=out)
    assert code == 1 and f"matches a known difference: {named}" in text, text


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(rope_type=np.array("longrope")), "rope_type 'longrope': one of linear, llama3, ntk, dynamic, yarn"),
        (
            dict(rope_type=np.array("default")),
            "'default' is RoPE unscaled, so factor, original_max_positions say nothing: leave them out",
        ),
        (dict(factor=np.array(0.5)), "factor 0.5: rope_type 'yarn' needs a factor in \\[1, 1e6\\]"),
        (dict(original_max_positions=np.array(0)), "original_max_positions 0: yarn needs L0"),
        (dict(beta_fast=np.array(1.0)), "0 < beta_slow < beta_fast"),
        (dict(cos=np.ones((S, 8)), sin=np.zeros((S, 8))), "rope_type with cos and sin: the tables hold any scaling"),
        (dict(rope_type=np.array("llama3"), original_max_positions=np.array(32)), "Llama 3.1's rule, L0 8192"),
        (dict(rope_type=np.array("linear"), original_max_positions=np.array(32)), "with linear: it takes no L0"),
    ],
    ids=["unknown", "default with a factor", "factor", "L0", "betas", "tables", "llama3's L0", "linear's L0"],
)
def test_rope_scaling_keys_that_do_not_fit_are_refused_naming_them(tmp_path, change, message):
    given, out = _scaled_file("yarn")
    with pytest.raises(forms.BadInput, match=message):
        explained(tmp_path, **(given | change), out=out)


def test_transformers_default_rope_type_alone_is_rope_unscaled(tmp_path):
    given, _ = _scaled_file("linear")
    qr, kr = (_turned(given[t], _frequencies(), np.arange(S)) for t in ("q", "k"))
    out = float32_stages(qr, kr, given["v"], np.triu(np.ones((S, S), bool), 1))["out"]
    unscaled = {name: a for name, a in given.items() if name != "factor"} | dict(rope_type=np.array("default"))
    code, text = explained(tmp_path, **unscaled, out=out)
    assert code == 0 and "scaled" not in text, text


def test_rope_scaling_without_pairing_is_refused(tmp_path):
    given, out = _scaled_file("ntk")
    del given["pairing"]
    with pytest.raises(forms.BadInput, match="rope_type, factor without 'pairing'"):
        explained(tmp_path, **given, out=out)


def test_yarn_s_attention_factor_on_the_softmax_scale_is_named_on_the_rotated_queries(tmp_path):
    """DeepSeek-V2/V3's side: cos and sin left alone, the scale times the factor squared; the same out, other rotated
    queries (spec conventions.rope_scaling)."""
    given, _ = _scaled_file("yarn")
    f, factor = _published("yarn", attention=False)
    qr, kr = (_turned(given[t], f, np.arange(S)) for t in ("q", "k"))
    assert factor == 1.0
    scaled_by = np.float32((0.1 * np.log(FACTOR) + 1) ** 2)  # on the scores: q k^T x scale x mscale^2
    out = float32_stages(qr * scaled_by, kr, given["v"], np.triu(np.ones((S, S), bool), 1))["out"]
    code, text = explained(tmp_path, **given, q_rotated=qr, out=out)
    assert code == 1 and "first intermediate that diverges: q_rotated" in text, text
    assert "matches a known difference: YaRN without its attention factor" in text and "out: within" in text, text


@pytest.mark.parametrize("grouping", ["repeat", "tile"])
def test_grouped_heads_normed_over_the_projection(tmp_path, grouping):
    """N 4 query heads over K 2: q normed over its 4 x H, k over its 2 x H before being shared; shared as torch's
    enable_gqa (repeat) within, tiled named (a second read found the norm's weights tiled wrongly with them)."""
    rng = np.random.default_rng(8)
    heads, kv_heads = 4, 2
    q = rng.standard_normal((1, heads, T, H)).astype(np.float32)
    k, v = (rng.standard_normal((1, kv_heads, T, H)).astype(np.float32) for _ in range(2))
    w_q, w_k = (rng.uniform(0.2, 1.8, n * H).astype(np.float32) for n in (heads, kv_heads))
    qr, kr = (
        _turned(_rms(t, np.reshape(w, (-1, 1, H)), 1e-6, over_heads=True), _frequencies(), np.arange(T))
        for t, w in ((q, w_q), (k, w_k))
    )
    share = (lambda t: np.repeat(t, 2, axis=1)) if grouping == "repeat" else (lambda t: np.tile(t, (1, 2, 1, 1)))
    out = float32_stages(qr, share(kr), share(v), CAUSAL)["out"]
    given = dict(q=q, k=k, v=v, num_kv_heads=np.array(kv_heads), causal=np.array(True), pairing=np.array("rotate_half"))
    code, text = explained(tmp_path, **given, norm_weight_q=w_q, norm_weight_k=w_k, out=out)
    if grouping == "repeat":
        assert code == 0 and "QK-norm over the projection" in text, text
    else:
        assert code == 1 and "matches a known difference: K/V heads tiled, not repeated" in text, text


def test_dynamic_s_base_follows_the_positions_a_known_difference_turns_at(tmp_path):
    """A packed row whose positions run on: dynamic's base at the row's length, not the longest document's."""
    cuts, L = np.array([0, 50, 70, 90]), 24
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((1, 90, H)).astype(np.float32) for _ in range(3))
    s = 3.0 * 90 / L - 2.0  # transformers' dynamic at the row's last position + 1
    qr, kr = (_turned(t, _frequencies(base=10000.0 * s ** (R / (R - 2))), np.arange(90)) for t in (q, k))
    document = np.repeat(np.arange(3), np.diff(cuts))
    hidden = np.triu(np.ones((90, 90), bool), 1) | (document[:, None] != document[None, :])
    given = dict(q=q, k=k, v=v, cu_seqlens=cuts, causal=np.array(True), pairing=np.array("rotate_half"))
    given |= dict(rope_type=np.array("dynamic"), factor=np.array(3.0), original_max_positions=np.array(L))
    code, text = explained(tmp_path, **given, out=float32_stages(qr, kr, v, hidden)["out"])
    assert code == 1 and "matches a known difference: RoPE positions running on across the packed row" in text, text


def test_ntk_on_two_rotated_dims_is_refused(tmp_path):
    given, out = _scaled_file("ntk")
    with pytest.raises(forms.BadInput, match="rotary_dim 2 with ntk: NTK's exponent R / \\(R - 2\\) needs R >= 4"):
        explained(tmp_path, **(given | dict(rotary_dim=np.array(2))), out=out)


def test_dynamic_s_base_from_a_longer_sequence_before_is_said(tmp_path):
    """An outside trial's: transformers' dynamic rotary module ran 100 tokens, then these 64 at its larger base."""
    given, _ = _scaled_file("dynamic")
    s = FACTOR * 100 / L0 - (FACTOR - 1)
    qr, kr = (_turned(given[t], _frequencies(base=10000.0 * s ** (R / (R - 2))), np.arange(S)) for t in ("q", "k"))
    out = float32_stages(qr, kr, given["v"], np.triu(np.ones((S, S), bool), 1))["out"]
    code, text = explained(tmp_path, **given, out=out)
    assert code == 1 and "a rotary module that ran a longer sequence before keeps that one's larger base" in text, text
