"""`explain` on the call forms ONNX's Attention and RotaryEmbedding state (tools/forms.py): packed heads, the
first query's position and each row's valid length, a window's right side, Llama 4's chunks, RoPE from given cos and
sin tables. Each right float32 answer is within; each wrong one is named (the intermediates: test_stages.py)."""

import numpy as np
import pytest
from explained import explained, float32_stages

from attention_conformance.run import tolerance_model
from attention_conformance.tools.explain import forms

RNG = np.random.default_rng(11)


def _heads(B, N, T, H):
    return RNG.standard_normal((B, N, T, H)).astype(np.float32)


def _packed(t):
    """[B, N, T, H] -> [B, T, N x H], as ONNX's 3D inputs hold heads."""
    return np.reshape(np.swapaxes(t, 1, 2), (t.shape[0], t.shape[2], -1))


def test_packed_heads_are_read_per_head_and_tiled_heads_named(tmp_path):
    q, k, v = _heads(2, 4, 3, 8), _heads(2, 2, 5, 8), _heads(2, 2, 5, 6)
    keys = dict(q=_packed(q), k=_packed(k), v=_packed(v), num_heads=np.array(4), num_kv_heads=np.array(2))
    right = float32_stages(q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1), False)["out"]
    code, text = explained(tmp_path, **keys, out=_packed(right))
    assert code == 0 and "packed" in text, text
    tiled = float32_stages(q, np.tile(k, (1, 2, 1, 1)), np.tile(v, (1, 2, 1, 1)), False)["out"]
    code, text = explained(tmp_path, **keys, out=_packed(tiled))
    assert code == 1 and "matches a known difference: K/V heads tiled, not repeated" in text, text
    with pytest.raises(forms.BadInput, match="packed heads give"):
        explained(tmp_path, **keys, out=right)
    with pytest.raises(forms.BadInput, match="look per head"):  # num_heads given with heads as [B, N, T, H]
        explained(tmp_path, **keys | dict(q=q, k=k, v=v), out=right)


def test_the_first_querys_position_sets_causal_order_and_other_alignments_are_named(tmp_path):
    q, k, v = _heads(1, 2, 3, 8), _heads(1, 2, 7, 8), _heads(1, 2, 7, 8)
    for stated, result, name in (
        (0, 4, "causal aligned bottom-right"),  # torch's is_causal, ONNX's without a cache: the result bottom-right
        (2, 0, "top-left causal alignment"),  # two keys cached before the block (ONNX's past length)
        (2, 4, "causal aligned bottom-right"),
    ):
        keys = dict(q=q, k=k, v=v, causal=np.array(True), position=np.array(stated))
        right = float32_stages(q, k, v, tolerance_model.hidden_keys(3, 7, causal=True, position=stated))["out"]
        code, text = explained(tmp_path, **keys, out=right)
        assert code == 0 and f"the first query at position {stated}" in text, text
        wrong = float32_stages(q, k, v, tolerance_model.hidden_keys(3, 7, causal=True, position=result))["out"]
        code, text = explained(tmp_path, **keys, out=wrong)
        assert code == 1 and f"matches a known difference: {name}" in text, f"{stated}, {name}:\n{text}"


def test_each_rows_valid_length_hides_its_padding_and_offsets_causal_order(tmp_path):
    q, k, v = _heads(2, 2, 2, 8), _heads(2, 2, 6, 8), _heads(2, 2, 6, 8)
    valid = np.array([4, 6])
    keys = dict(q=q, k=k, v=v, causal=np.array(True), valid_length=valid)
    row = (valid - 2)[:, None, None, None]
    padding = np.arange(6) >= valid[:, None, None, None]
    right = float32_stages(q, k, v, tolerance_model.hidden_keys(2, 6, causal=True, position=row) | padding)["out"]
    code, text = explained(tmp_path, **keys, out=right)
    assert code == 0 and "valid lengths [4, 6]" in text, text
    for name, hidden in (
        ("top-left causal alignment", tolerance_model.hidden_keys(2, 6, causal=True, position=0) | padding),
        ("per-row valid length ignored (causal top-left)", tolerance_model.hidden_keys(2, 6, causal=True, position=0)),
    ):
        code, text = explained(tmp_path, **keys, out=float32_stages(q, k, v, hidden)["out"])
        assert code == 1 and f"matches a known difference: {name}" in text, f"{name}:\n{text}"
    with pytest.raises(forms.BadInput, match="one integer 0..S"):
        explained(tmp_path, **keys, position=np.array(0), out=right)


def test_a_window_reaching_past_the_query_is_stated_and_ignoring_its_right_side_named(tmp_path):
    q, k, v = _heads(1, 1, 5, 4), _heads(1, 1, 5, 4), _heads(1, 1, 5, 4)
    band = dict(q=q, k=k, v=v, window=np.array(2), right_window=np.array(2), position=np.array(0))
    right = float32_stages(q, k, v, tolerance_model.hidden_keys(5, 5, window=2, position=0, right=2))["out"]
    code, text = explained(tmp_path, **band, out=right)
    assert code == 0 and "a window of 2 and 2 after" in text, text
    causal_band = float32_stages(q, k, v, tolerance_model.hidden_keys(5, 5, window=2, position=0))["out"]
    code, text = explained(tmp_path, **band, out=causal_band)
    assert code == 1 and "matches a known difference: the right window ignored" in text, text


def test_llama4_chunks_are_stated_and_each_wrong_boundary_named(tmp_path):
    """A decode block of 4 queries over 12 keys in chunks of 5 (positions 8..11: the boundary at 10 inside it)."""
    q, k, v = _heads(1, 2, 4, 8), _heads(1, 2, 12, 8), _heads(1, 2, 12, 8)
    keys = dict(q=q, k=k, v=v, causal=np.array(True), chunk=np.array(5))
    queries, key = np.arange(8, 12)[:, None], np.arange(12)

    def out(hidden):
        return float32_stages(q, k, v, hidden)["out"]

    code, text = explained(tmp_path, **keys, out=out((key > queries) | (key // 5 != queries // 5)))
    assert code == 0 and "chunks of 5" in text, text
    for name, hidden in (
        ("no chunks", key > queries),
        ("chunks one position later", (key > queries) | ((key + 1) // 5 != (queries + 1) // 5)),
        ("chunks counted from the query block", (key > queries) | (key // 5 != (queries - 8) // 5)),
    ):
        code, text = explained(tmp_path, **keys, out=out(hidden))
        assert code == 1 and f"matches a known difference: {name}" in text, f"{name}:\n{text}"
    with pytest.raises(forms.BadInput, match="chunks hold 1 position or more"):
        explained(tmp_path, **keys | dict(chunk=np.array(0)), out=out(key > queries))


def _rotated(t, cos, sin, interleaved):
    """RoPE in float32 from given tables, as ONNX's RotaryEmbedding: cos and sin [..., T, R/2] per row."""
    R = 2 * cos.shape[-1]
    a, b = (t[..., 0:R:2], t[..., 1:R:2]) if interleaved else (t[..., : R // 2], t[..., R // 2 : R])
    first, second = cos * a - sin * b, sin * a + cos * b
    turned = (
        np.stack([first, second], -1).reshape(a.shape[:-1] + (R,))
        if interleaved
        else np.concatenate([first, second], -1)
    )
    return np.concatenate([turned, t[..., R:]], axis=-1).astype(np.float32)


def test_rope_from_given_tables_at_position_ids_and_its_mistakes_named(tmp_path):
    x = _heads(2, 3, 4, 8)
    cos, sin = (RNG.random((20, 2)).astype(np.float32) for _ in range(2))  # rotary_dim 4 of 8
    ids = np.array([[3, 9, 1, 0], [7, 7, 19, 2]])
    keys = dict(q=x, k=x, v=x, pairing=np.array("rotate_half"), cos=cos, sin=sin, position_ids=ids)
    at = (cos[ids][:, None], sin[ids][:, None])
    code, text = explained(tmp_path, **keys, q_rotated=_rotated(x, *at, interleaved=False))
    assert code == 0 and "RoPE rotate_half from cos and sin at their position_ids" in text, text
    for name, wrong in (
        ("RoPE with interleaved pairs", _rotated(x, *at, interleaved=True)),
        ("RoPE position_ids ignored", _rotated(x, cos[:4], sin[:4], interleaved=False)),
    ):
        code, text = explained(tmp_path, **keys, q_rotated=wrong)
        assert code == 1 and f"matches a known difference: {name}" in text, f"{name}:\n{text}"
    with pytest.raises(forms.BadInput, match="position_ids"):
        explained(tmp_path, **keys | dict(position_ids=ids + 20), q_rotated=_rotated(x, *at, interleaved=False))
