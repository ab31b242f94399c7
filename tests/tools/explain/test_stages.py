"""`explain` on the intermediates a file gives (tools/stages.py): ONNX's qk_matmul_output modes as `scaled`,
`capped`, `masked` and `weights`, each judged; one that holds another stage's values, or a finite fill where a hidden
key's -inf is, named; and the bias added before the soft cap."""

import numpy as np
from explained import explained, float32_stages

from attention_conformance.tools.explain import stages

RNG = np.random.default_rng(12)


def _heads(B, N, T, H):
    return RNG.standard_normal((B, N, T, H)).astype(np.float32)


def test_each_intermediate_of_onnxs_modes_is_judged_and_a_mixed_up_one_named(tmp_path):
    q, k, v = _heads(1, 2, 4, 8) * 3, _heads(1, 2, 6, 8) * 3, _heads(1, 2, 6, 8)  # scores of tens: a cap of 2 bends
    T, S = 4, 6
    bias = RNG.standard_normal((T, S)).astype(np.float32)
    bias[:, 4:] = -np.inf
    keys = dict(q=q, k=k, v=v, bias=bias, softcap=np.array(2.0))
    hidden = np.isneginf(bias)
    right = float32_stages(q, k, v, hidden, cap=2.0, bias=np.where(hidden, 0, bias))
    code, text = explained(tmp_path, **keys, **right)
    assert code == 0 and all(f"  {name}: within" in text for name in right), text
    assert set(stages.HOLDS) < set(right) | {"scores"}
    named = (
        ("scaled", right["capped"], "scaled holds capped"),  # onnx.reference's mode 0 with a soft cap
        ("masked", np.where(hidden, np.finfo(np.float32).min, right["masked"]), "hidden keys filled with -3.403e+38"),
    )
    for stage, wrong, name in named:
        code, text = explained(tmp_path, **keys, **right | {stage: wrong})
        assert code == 1 and f"matches a known difference: {name}" in text, f"{name}:\n{text}"
        assert f"but {stage} is beyond: a known difference" in text.splitlines()[-1], text
    first = float32_stages(q, k, v, hidden, cap=2.0, bias=np.where(hidden, 0, bias), bias_first=True)["out"]
    code, text = explained(tmp_path, **keys, out=first)
    assert code == 1 and "matches a known difference: the bias added before soft-capping" in text, text
