"""`attention-conformance explain FILE.npz`: a verdict on a user's own tensors, from NumPy alone.

Each known difference is built on purpose and must be named; the right answer computed in the
dtype must be within; one element pushed off must be beyond and located; bad files are refused
in one line with exit 2."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from explained import explained, qkv_arrays

from attention_conformance.dtypes import DTYPES, np_dtype
from attention_conformance.run import tolerance_model
from attention_conformance.tools import examples
from attention_conformance.tools.examples import _attention
from attention_conformance.tools.explain import command, problem

COMMAND = str(Path(sys.executable).parent / "attention-conformance")


@pytest.fixture(scope="module")
def qkv():
    return qkv_arrays()


@pytest.mark.parametrize("name", sorted(examples.EXAMPLES))
def test_each_example_gets_its_verdict_from_the_installed_command_run_elsewhere(tmp_path, name):
    examples.write(tmp_path)
    done = subprocess.run(
        [COMMAND, "explain", f"{name}.npz"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    code, difference = examples.EXAMPLES[name]
    assert done.returncode == code, done.stdout + done.stderr
    verdict = (done.stderr if code else done.stdout).strip().splitlines()[-1]
    assert verdict.startswith("verdict: " + ("beyond" if code else "within")), verdict
    named = [line for line in done.stdout.splitlines() if line.startswith("matches a known difference")]
    assert named == ([] if difference is None else named[:1]) and len(named) == (difference is not None), done.stdout
    if difference:
        assert named[0].startswith(f"matches a known difference: {difference}"), named


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_answer_computed_in_the_dtype_is_within_and_one_element_off_is_beyond_and_located(tmp_path, dtype, qkv):
    q, k, v = (t.astype(np_dtype(dtype)) for t in qkv)
    out = _attention(q, k, v, dtype, accumulate="float32" if dtype in ("float16", "bfloat16") else None)
    stored = (
        dict(q=q.astype(np.float32), k=k.astype(np.float32), v=v.astype(np.float32))
        if dtype == "bfloat16"
        else dict(q=q, k=k, v=v)
    )
    extra = dict(dtype=np.array("bfloat16")) if dtype == "bfloat16" else {}
    save = (lambda a: a.astype(np.float32)) if dtype == "bfloat16" else (lambda a: a)
    code, text = explained(tmp_path, out=save(out), **stored, **extra)
    assert code == 0, text
    wrong = out.astype(np.float64)
    wrong[1, 2, 4, 5] += 0.25
    code, text = explained(tmp_path, out=save(wrong.astype(out.dtype)), **stored, **extra)
    assert code == 1 and "worst out[1, 2, 4, 5]" in text, text


def test_each_known_difference_is_named(tmp_path, qkv):
    q, k, v = qkv
    T, S = q.shape[-2], k.shape[-2]
    mask = np.random.default_rng(1).random((T, S)) < 0.25
    scores = q @ np.swapaxes(k, -1, -2) / np.float32(np.sqrt(8))
    e = np.exp(scores - scores.max(axis=-2, keepdims=True))
    over_queries = (e / e.sum(axis=-2, keepdims=True)) @ v
    top_left = np.arange(S)[None, :] > np.arange(T)[:, None]
    cases = {
        "top-left causal alignment": dict(causal=np.array(True), out=_attention(q, k, v, "float32", hidden=top_left)),
        "no causal mask": dict(causal=np.array(True), out=_attention(q, k, v, "float32")),
        "inverted mask polarity": dict(mask=mask, out=_attention(q, k, v, "float32", hidden=~mask)),
        "scores scaled by 1/H": dict(out=_attention(q, k, v, "float32", scale=1 / 8)),
        "scores scaled by 1 (no scaling)": dict(out=_attention(q, k, v, "float32", scale=1.0)),
        "softmax over the wrong axis": dict(out=over_queries.astype(np.float32)),
        "k and v swapped": dict(out=_attention(q, v, k, "float32")),
    }
    for name, arrays in cases.items():
        code, text = explained(tmp_path, q=q, k=k, v=v, **arrays)
        assert code == 1 and f"matches a known difference: {name}:" in text, f"{name}:\n{text}"
    hidden = np.zeros((T, S), dtype=bool)
    hidden[2] = True
    with np.errstate(invalid="ignore"):
        nan_rows = _attention(q, k, v, "float32", hidden=hidden)
    code, text = explained(tmp_path, q=q, k=k, v=v, mask=hidden, out=nan_rows)
    assert code == 1 and "NaN on fully masked rows" in text and "every other row is within" in text, text


def test_weight_mistakes_in_the_x_form_and_the_first_diverging_intermediate(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 12)).astype(np.float32)
    w = {n: rng.standard_normal((12, 12)).astype(np.float32) for n in ("w_query", "w_key", "w_value")}
    kv = {
        n: rng.standard_normal((12, 6)).astype(np.float32) for n in ("w_key", "w_value")
    }  # 4 heads over 2 K/V heads of 3

    def heads(t, n):
        return np.stack(np.split(t, n, axis=-1), axis=-3)

    def computed(weights, tile=False, n=1, kv_n=1):
        q, k, v = (heads(x @ weights[m], c) for m, c in (("w_query", n), ("w_key", kv_n), ("w_value", kv_n)))
        k, v = (np.tile(t, (n // kv_n, 1, 1)) if tile else np.repeat(t, n // kv_n, axis=0) for t in (k, v))
        s = q @ np.swapaxes(k, -1, -2)
        return s, _attention(q, k, v, "float32") if n > 1 else _attention(q[0], k[0], v[0], "float32")

    scores, out = computed(w | {"w_query": w["w_query"].T})
    code, text = explained(tmp_path, x=x, **w, out=out, scores=scores[0])
    assert code == 1 and "first intermediate that diverges: scores" in text and "w_query transposed" in text, text
    _, out = computed(w | {"w_key": w["w_value"], "w_value": w["w_key"]})
    code, text = explained(tmp_path, x=x, **w, out=out)
    assert code == 1 and "w_key and w_value swapped" in text, text
    grouped = w | kv
    _, out = computed(grouped, n=4, kv_n=2)
    code, text = explained(tmp_path, x=x, **grouped, num_heads=np.array(4), num_kv_heads=np.array(2), out=out)
    assert code == 0, text
    _, out = computed(grouped, tile=True, n=4, kv_n=2)
    code, text = explained(tmp_path, x=x, **grouped, num_heads=np.array(4), num_kv_heads=np.array(2), out=out)
    assert code == 1 and "K/V heads tiled, not repeated" in text, text


@pytest.mark.parametrize(
    "arrays, says",
    [
        (dict(q=np.ones((2, 4)), k=np.ones((3, 4)), v=np.ones((3, 4))), "no 'out'"),
        (
            dict(q=np.ones((2, 4)), k=np.ones((3, 4)), v=np.ones((3, 4)), out=np.ones((2, 4)), mask=np.ones((2, 3))),
            "'mask' is float64; it must be bool",
        ),
        (dict(q=np.ones((2, 4)), k=np.ones((3, 4)), v=np.ones((3, 4)), out=np.ones((2, 5))), "'out' has shape [2, 5]"),
        (
            dict(q=np.ones((2, 4)), k=np.ones((3, 4)), v=np.ones((3, 4)), out=np.ones((2, 4)), query=np.ones(1)),
            "unknown key 'query'",
        ),
        (dict(q=np.ones((2, 4)), x=np.ones((2, 4)), out=np.ones((2, 4))), "give either q, k and v or x"),
        (
            dict(q=np.ones((2, 4)), k=np.ones((3, 4)), v=np.ones((3, 4)), out=np.ones((2, 4), dtype=np.int32)),
            "'out' is int32",
        ),
        (
            dict(
                q=np.ones((2, 4)),
                k=np.ones((3, 4)),
                v=np.ones((3, 4)),
                out=np.full((2, 4), 0.1),
                dtype=np.array("bfloat16"),
            ),
            "not bfloat16 numbers",
        ),
        (
            dict(
                q=np.ones((1, 2, 4)),
                k=np.ones((1, 3, 4)),
                v=np.ones((1, 3, 4)),
                out=np.ones((1, 2, 4)),
                num_kv_heads=np.array(2),
            ),
            "num_kv_heads 2 needs",
        ),
        (
            dict(
                q=np.ones((2, 4)),
                k=np.ones((3, 4)),
                v=np.ones((3, 4)),
                out=np.ones((2, 4)),
                causal=np.array([True, False]),
            ),
            "'causal' must be a single bool",
        ),
    ],
)
def test_bad_input_is_refused_in_one_line_with_exit_2(tmp_path, arrays, says):
    np.savez(tmp_path / "bad.npz", **arrays)
    done = subprocess.run([COMMAND, "explain", "bad.npz"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    assert len(done.stderr.splitlines()) == 1 and says in done.stderr and "bad.npz" in done.stderr, done.stderr


def test_a_file_that_is_not_an_npz_or_holds_objects_is_refused(tmp_path):
    (tmp_path / "text.npz").write_text("not a zip")
    np.savez(tmp_path / "objects.npz", q=np.array([{"a": 1}], dtype=object))
    for name in ("text.npz", "objects.npz", "absent.npz"):
        done = subprocess.run([COMMAND, "explain", name], cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and name in done.stderr, done.stderr


def test_explain_imports_no_framework(tmp_path, qkv):
    q, k, v = qkv
    np.savez(tmp_path / "f.npz", q=q, k=k, v=v, out=_attention(q, k, v, "float32"))
    probe = (
        "import sys; from attention_conformance import cli; code = cli.main(['explain', sys.argv[1]]); "
        "loaded = [m for m in ('torch', 'tensorflow', 'jax', 'mlx', 'onnxruntime') if m in sys.modules]; "
        "print('frameworks:', loaded); sys.exit(code)"
    )
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "f.npz")], capture_output=True, text=True)
    assert done.returncode == 0 and "frameworks: []" in done.stdout, done.stdout + done.stderr


def test_the_readme_walks_through_every_example():
    readme = (Path(__file__).resolve().parents[3] / "docs" / "tolerances.md").read_text()
    section = readme.split("## Is my difference a bug?", 1)[1].split("\n## ", 1)[0]
    for name in examples.EXAMPLES:
        assert f"{name}.npz" in section, f"docs/tolerances.md's 'Is my difference a bug?' does not mention {name}.npz"


def test_more_known_differences_are_named(tmp_path, qkv):
    q, k, v = qkv
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 12)).astype(np.float32)
    w = {n: rng.standard_normal((12, 8)).astype(np.float32) for n in ("w_query", "w_key", "w_value")}
    Q, K, V = (x @ w[n] for n in ("w_query", "w_key", "w_value"))
    hidden = np.zeros((5, 5), dtype=bool)
    hidden[1] = True
    cases = {
        "scores scaled by 1/sqrt(d_in)": dict(out=_attention(Q, K, V, "float32", scale=1 / np.sqrt(12))),
        "w_query and w_key swapped": dict(out=_attention(K, Q, V, "float32")),
        "uniform weights on fully masked rows": dict(
            mask=hidden, out=_attention(Q, K, V, "float32", hidden=hidden, fill=-1e9)
        ),
    }
    for name, arrays in cases.items():
        code, text = explained(tmp_path, x=x, **w, **arrays)
        assert code == 1 and f"matches a known difference: {name}" in text, f"{name}:\n{text}"
    heads = np.stack(np.split(Q, 2, axis=-1)), np.stack(np.split(K, 2, axis=-1)), np.stack(np.split(V, 2, axis=-1))
    code, text = explained(
        tmp_path,
        q=heads[0],
        k=heads[1],
        v=heads[2],
        num_kv_heads=np.array(2),
        out=_attention(*heads, "float32", scale=1 / np.sqrt(8)),
    )
    assert code == 1 and "matches a known difference: scores scaled by 1/sqrt(N x H)" in text, text
    qg = rng.standard_normal((4, 6, 8)).astype(np.float32)
    kg, vg = (rng.standard_normal((2, 6, 8)).astype(np.float32) for _ in range(2))
    tiled = _attention(qg, np.tile(kg, (2, 1, 1)), np.tile(vg, (2, 1, 1)), "float32")
    code, text = explained(tmp_path, q=qg, k=kg, v=vg, num_kv_heads=np.array(2), out=tiled)
    assert code == 1 and "matches a known difference: K/V heads tiled, not repeated" in text, text


def test_an_intermediate_beyond_makes_the_verdict_beyond_and_scaled_scores_are_recognised(tmp_path, qkv):
    q, k, v = qkv
    out = _attention(q, k, v, "float32")
    scaled = (q @ np.swapaxes(k, -1, -2) / np.float32(np.sqrt(8))).astype(np.float32)
    code, text = explained(tmp_path, q=q, k=k, v=v, out=out, scores=scaled)
    assert code == 1 and "first intermediate that diverges: scores" in text and "already scaled" in text, text
    assert "out is within" in text.splitlines()[-1], text


def test_a_row_at_float16s_largest_number_still_has_a_finite_allowance(tmp_path):
    q, k = np.zeros((3, 4), np.float16), np.zeros((3, 4), np.float16)
    v = np.full((3, 4), 1000.0, np.float16)
    v[:, 0] = 65504
    out = _attention(q, k, v, "float16", "float32")
    code, _ = explained(tmp_path, q=q, k=k, v=v, out=out)
    assert code == 0
    wrong = out.copy()
    wrong[1, 2] = 1100.0
    code, text = explained(tmp_path, q=q, k=k, v=v, out=wrong)
    assert code == 1 and "worst out[1, 2]" in text, text


@pytest.mark.parametrize(
    "arrays, says",
    [
        (
            dict(
                q=np.array([np.nan, 1.0])[None].repeat(2, 0), k=np.ones((3, 2)), v=np.ones((3, 2)), out=np.ones((2, 2))
            ),
            "'q' holds NaN or inf (at [0, 0])",
        ),
        (
            dict(q=np.ones((2, 4)), k=np.ones((3, 4)), v=np.ones((3, 4)), out=np.ones((2, 4)), scale=np.array(0.0)),
            "'scale' is 0.0",
        ),
        (
            dict(
                q=np.ones((2, 4)),
                k=np.ones((3, 4)),
                v=np.ones((3, 4)),
                out=np.ones((2, 4)),
                mask=np.zeros((5, 2, 3), bool),
            ),
            "'mask' [5, 2, 3] does not broadcast",
        ),
        (
            dict(
                q=np.ones((2, 4)),
                k=np.ones((3, 4)),
                v=np.ones((3, 4)),
                out=np.ones((2, 4)),
                dtype=np.array(["float32"]),
            ),
            "'dtype' must be a single string",
        ),
        (
            dict(q=np.ones((4, 3, 4)), k=np.ones((2, 3, 4)), v=np.ones((2, 3, 4)), out=np.ones((4, 3, 4))),
            "give num_kv_heads",
        ),
    ],
)
def test_more_bad_input_is_refused_in_one_line(tmp_path, arrays, says):
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(problem.BadInput, match=None) as refused:
        command.explain(tmp_path / "bad.npz", out=lambda line: None, err=lambda line: None)
    assert says in str(refused.value) and "\n" not in str(refused.value), str(refused.value)


def test_an_npy_file_is_refused(tmp_path):
    np.save(tmp_path / "one.npy", np.ones((2, 2)))
    with pytest.raises(problem.BadInput, match="np.save's .npy"):
        problem.load(tmp_path / "one.npy")


def test_a_bfloat16_result_saved_without_its_dtype_gets_a_hint(tmp_path, qkv):
    q, k, v = (t.astype(np_dtype("bfloat16")).astype(np.float32) for t in qkv)
    out = _attention(q, k, v, "bfloat16", "float32").astype(np.float32)
    code, text = explained(tmp_path, q=q, k=k, v=v, out=out)
    assert code == 1 and "save it with dtype='bfloat16'" in text, text
    code, text = explained(tmp_path, q=q, k=k, v=v, out=out, dtype=np.array("bfloat16"))
    assert code == 0, text


def test_a_float16_problem_whose_stored_scores_overflow_is_refused_in_one_line(tmp_path):
    rng = np.random.default_rng(0)
    q, k = ((rng.standard_normal((8, 8)) * 300).astype(np.float16) for _ in range(2))
    v = rng.standard_normal((8, 8)).astype(np.float16)
    scaled = q.astype(np.float32) @ k.astype(np.float32).T / np.sqrt(8)  # a kernel that never stores q k^T
    w = np.exp(scaled - scaled.max(-1, keepdims=True))
    out = (w / w.sum(-1, keepdims=True) @ v.astype(np.float32)).astype(np.float16)
    with pytest.raises(problem.BadInput, match="beyond float16's largest number .* cannot judge"):
        explained(tmp_path, q=q, k=k, v=v, out=out)


def test_weights_on_a_hidden_key_are_named_as_such(tmp_path, qkv):
    q, k, v = (t[0, 0, :6, :] for t in qkv)
    hidden = tolerance_model.hidden_keys(6, 6, causal=True)
    exact = tolerance_model.attend(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), hidden)
    clipped = np.where(hidden, 1.6e-28, exact["weights"]).astype(np.float32)  # Paddle's softmax clips at -64
    code, text = explained(
        tmp_path, q=q, k=k, v=v, causal=np.array(True), weights=clipped, out=exact["out"].astype(np.float32)
    )
    assert code == 1 and "give a hidden key nonzero probability" in text and "the only answer is exactly 0.0" in text, (
        text
    )


def _float32_attention(q, k, v, hidden, cap=None, sinks=None, cap_after_mask=False):
    """Attention in float32 with the later families' parts, written plainly in NumPy, as a user's kernel."""
    scores = q @ np.swapaxes(k, -1, -2) / np.float32(np.sqrt(q.shape[-1]))
    if cap and not cap_after_mask:
        scores = np.tanh(scores / np.float32(cap)) * np.float32(cap)
    scores = np.where(hidden, np.float32(-np.inf), scores)
    if cap and cap_after_mask:
        scores = np.tanh(scores / np.float32(cap)) * np.float32(cap)
    if sinks is not None:
        sink = np.broadcast_to(np.asarray(sinks, np.float32)[:, None, None], scores.shape[:-1] + (1,))
        scores = np.concatenate([scores, sink], axis=-1)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = (e / e.sum(axis=-1, keepdims=True))[..., : k.shape[-2]]
    return (weights @ v).astype(np.float32)


def _turned(t, pairing, first):
    """RoPE in float32 as HF writes it (theta 10000, every dim turned), rows at positions first, first + 1, .."""
    H = t.shape[-1]
    angles = np.arange(first, first + t.shape[-2], dtype=np.float32)[:, None] * (
        np.float32(1) / np.float32(10000) ** (np.arange(0, H, 2, dtype=np.float32) / np.float32(H))
    )
    cos, sin = np.cos(angles), np.sin(angles)
    a, b = (t[..., 0::2], t[..., 1::2]) if pairing == "interleaved" else (t[..., : H // 2], t[..., H // 2 :])
    first_half, second_half = a * cos - b * sin, a * sin + b * cos
    if pairing == "interleaved":
        return np.stack([first_half, second_half], axis=-1).reshape(t.shape)
    return np.concatenate([first_half, second_half], axis=-1)


def test_windows_soft_caps_sinks_and_rope_are_judged_and_their_mistakes_named(tmp_path, qkv):
    """Issue 40's families: the right float32 answer is within, and each known mistake is named."""
    q, k, v = qkv  # 3 heads, 6 queries over 9 keys
    T, S = q.shape[-2], k.shape[-2]
    band = tolerance_model.hidden_keys(T, S, window=3)
    code, text = explained(tmp_path, q=q, k=k, v=v, window=np.array(3), out=_float32_attention(q, k, v, band))
    assert code == 0 and "a window of 3" in text, text
    for name, hidden in (
        ("a window one key wider", tolerance_model.hidden_keys(T, S, window=4)),
        ("a window aligned top-left", tolerance_model.hidden_keys(S, S, window=3)[:T]),  # the first T queries' band
    ):
        code, text = explained(tmp_path, q=q, k=k, v=v, window=np.array(3), out=_float32_attention(q, k, v, hidden))
        assert code == 1 and f"matches a known difference: {name}" in text, f"{name}:\n{text}"
    large = (q * 6, k * 6, v)  # scores of tens: a cap of 5 bends them
    causal = tolerance_model.hidden_keys(T, S, causal=True)
    capped = dict(q=large[0], k=large[1], v=v, causal=np.array(True), softcap=np.array(5.0))
    assert explained(tmp_path, **capped, out=_float32_attention(*large, causal, cap=5.0))[0] == 0
    for name, out in (
        ("soft-capping after the mask", _float32_attention(*large, causal, cap=5.0, cap_after_mask=True)),
        ("no soft-capping", _float32_attention(*large, causal)),
    ):
        code, text = explained(tmp_path, **capped, out=out)
        assert code == 1 and f"matches a known difference: {name}" in text, f"{name}:\n{text}"
    zeroed = _float32_attention(q * 0, k, v, causal)
    code, text = explained(tmp_path, q=q, k=k, v=v, causal=np.array(True), softcap=np.array(0.0), out=zeroed)
    assert code == 1 and "matches a known difference: a cap of 0 read as zero logits" in text, text
    sinks = np.array([2.0, -1.0, 3.0], np.float32)
    sunk = dict(q=q, k=k, v=v, num_kv_heads=np.array(3), sinks=sinks)
    assert explained(tmp_path, **sunk, out=_float32_attention(q, k, v, False, sinks=sinks))[0] == 0
    code, text = explained(tmp_path, **sunk, out=_float32_attention(q, k, v, False))
    assert code == 1 and "matches a known difference: the sink ignored" in text, text
    rope = dict(q=q, k=k, v=v, causal=np.array(True), pairing=np.array("rotate_half"))
    right = _float32_attention(_turned(q, "rotate_half", S - T), _turned(k, "rotate_half", 0), v, causal)
    assert explained(tmp_path, **rope, out=right)[0] == 0
    for name, out in (
        (
            "RoPE with interleaved pairs",
            _float32_attention(_turned(q, "interleaved", 3), _turned(k, "interleaved", 0), v, causal),
        ),
        (
            "no RoPE position offset",
            _float32_attention(_turned(q, "rotate_half", 0), _turned(k, "rotate_half", 0), v, causal),
        ),
    ):
        code, text = explained(tmp_path, **rope, out=out)
        assert code == 1 and f"matches a known difference: {name}" in text, f"{name}:\n{text}"
