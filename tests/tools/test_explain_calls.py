"""`explain` on the forms real calls state (issue 59): an additive float bias (ONNX's and torch's float attn_mask,
ALiBi's and T5's biases), its -inf entries hiding keys."""

import numpy as np
import pytest
from explained import explained, qkv_arrays

from attention_conformance.tools import explain_file


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
    with pytest.raises(explain_file.BadInput, match="does not broadcast"):
        explain_file.Problem("f.npz", dict(q=q, k=k, v=v, bias=bias[..., :2], out=biased(1.0)))
    with pytest.raises(explain_file.BadInput, match="NaN or \\+inf"):
        explain_file.Problem("f.npz", dict(q=q, k=k, v=v, bias=np.full((T, S), np.inf, np.float32), out=biased(1.0)))
