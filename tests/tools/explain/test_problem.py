"""`explain` on the forms real calls state (issue 59): an additive float bias (ONNX's and torch's float attn_mask,
ALiBi's and T5's biases), its -inf entries hiding keys."""

import numpy as np
import pytest
from explained import explained, qkv_arrays

from attention_conformance.tools.explain import problem


@pytest.fixture(scope="module")
def qkv():
    return qkv_arrays()


def test_an_additive_bias_is_stated_its_neg_inf_hides_and_ignoring_it_is_named(tmp_path, qkv):
    """issue 59: ONNX's and torch's float attn_mask, ALiBi's and T5's biases are added to the scaled scores."""
    q, k, v = qkv
    T, S = q.shape[-2], k.shape[-2]
    slopes = 2.0 ** -np.arange(1, 4)[:, None, None]  # ALiBi's, one a head: slope x (j - i), bottom-right aligned
    alibi = (slopes * (np.arange(S)[None, :] - np.arange(T)[:, None] - (S - T))).astype(np.float32)
    bias = np.where(np.arange(S) > np.arange(T)[:, None] + (S - T), -np.inf, alibi).astype(np.float32)  # causal

    def biased(times):
        scores = q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64) / np.sqrt(8)
        scores = scores + np.where(np.isneginf(bias), -np.inf, times * np.where(np.isneginf(bias), 0.0, bias))
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        return ((e / e.sum(axis=-1, keepdims=True)) @ v).astype(np.float32)

    code, text = explained(tmp_path, q=q, k=k, v=v, bias=bias, out=biased(1.0))
    assert code == 0 and "an additive bias" in text, text
    code, text = explained(tmp_path, q=q, k=k, v=v, bias=bias, out=biased(0.0))
    assert code == 1 and "matches a known difference: the bias ignored" in text, text
    code, text = explained(tmp_path, q=q, k=k, v=v, bias=bias, out=biased(2.0))  # a slope table ported wrong
    assert code == 1 and "matches a known difference: the bias doubled" in text, text
    code, text = explained(tmp_path, q=q, k=k, v=v, bias=bias, out=biased(-1.0))  # ALiBi's distance as i - j
    assert code == 1 and "matches a known difference: the bias negated" in text, text
    code, text = explained(tmp_path, q=q, k=k, v=v, bias=bias[::-1].copy(), out=biased(1.0))  # slopes read backwards
    assert code == 1 and "matches a known difference: the bias's heads reversed" in text, text
    with pytest.raises(problem.BadInput, match="does not broadcast"):
        problem.Problem("f.npz", dict(q=q, k=k, v=v, bias=bias[..., :2], out=biased(1.0)))
    with pytest.raises(problem.BadInput, match="NaN or \\+inf"):
        problem.Problem("f.npz", dict(q=q, k=k, v=v, bias=np.full((T, S), np.inf, np.float32), out=biased(1.0)))


def _attention(q, k, v):
    scores = q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64) / np.sqrt(q.shape[-1])
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v.astype(np.float64)


def test_heads_split_without_the_transpose_and_every_weight_transposed_are_named(tmp_path):
    """The outside trial's port bugs that were "not rounding" and nothing more: a packed [B, T, N x H] tensor viewed
    as [B, N, T, H], and all three projections in nn.Linear's [out, in] layout."""
    rng = np.random.default_rng(3)
    B, T, N, H = 2, 5, 4, 8
    q, k, v = (rng.standard_normal((B, T, N * H)).astype(np.float32) for _ in range(3))
    right = [np.swapaxes(t.reshape(B, T, N, H), 1, 2) for t in (q, k, v)]
    wrong = [t.reshape(B, N, T, H) for t in (q, k, v)]
    for split, code_wanted in ((right, 0), (wrong, 1)):
        out = np.swapaxes(_attention(*split), 1, 2).reshape(B, T, N * H).astype(np.float32)
        code, text = explained(tmp_path, q=q, k=k, v=v, num_heads=np.int64(N), out=out)
        assert code == code_wanted, text
    assert "matches a known difference: heads split without the transpose" in text, text
    code, text = explained(tmp_path, q=q, k=k, v=v, out=out)  # num_heads forgotten: read as one head of 32
    assert code == 1 and "give num_heads" in text, text
    x = rng.standard_normal((T, 16)).astype(np.float32)
    w = {n: rng.standard_normal((16, 16)).astype(np.float32) for n in ("w_query", "w_key", "w_value")}
    out = _attention(*(x @ t.T for t in w.values())).astype(np.float32)
    code, text = explained(tmp_path, x=x, **w, out=out)
    assert code == 1 and "matches a known difference: every weight transposed" in text, text
