"""The stages read by opset 23's wording of qk_matmul_output_mode (1: after the mask, 2: after softcap): onnxruntime
1.31 numbers them as onnx 1.23 does (1: softcap before the mask, 2: both), so "capped" comes back with every hidden
key at float32's lowest."""

from attention_conformance.adapters.onnxruntime import *
from attention_conformance.adapters.onnxruntime.shared import _one_head, _run

EXPECTED = "caught"
MUST_FAIL = ("stages_gemma2_causal", "stages_small_cap", "stages_zero_disables")


def _stages(g, ranks, cap, causal):
    modes = {"scaled": 0, "capped": 2, "weights": 3}  # the bug: 2 for the capped scores
    return {
        name: g("Attention", "q", "k", "v", "", "", "", outputs=4, is_causal=int(causal), softcap=cap,
                qk_matmul_output_mode=mode)[3]
        for name, mode in modes.items()
    }  # fmt: skip


def attention_stages(x, w_query, w_key, w_value, cap, causal):
    q, k, v = (_one_head(x, w) for w in (w_query, w_key, w_value))
    return {name: out[:, 0] for name, out in _run(_stages, float(cap), bool(causal), q=q, k=k, v=v).items()}
