"""One verdict: `run`, `explain` and `fuzz` judge the same output on the same inputs the same way.

The tensors: causal attention from an adapter outside this checkout whose softmax clips x - max at
-64, as PaddlePaddle's does (FRAMEWORK-FACTS: softmax([0, -inf]) = [1, 1.6e-28]), so every key after a
query gets 1.6e-28 instead of 0; and, beside it, the same adapter unchanged. The rule all three apply:
a probability given to a hidden key must be exactly zero (the exact answer is 0 and no rounding can
reach it: tolerance_model.allowed, fields.upper_triangle_zero).
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attention_conformance.cases import golden, inputs, loader
from attention_conformance.tools import template

COMMAND = str(Path(sys.executable).parent / "attention-conformance")
EXACT_ZERO = "e = np.where(hidden, 0.0, exp(filled - np.where(empty, 0.0, row_max)))"
CLIPPED = "e = exp(np.maximum(filled - np.where(empty, 0.0, row_max), -64.0))  # Paddle's ValueClip"
CASE = "causal_cat_sat_mat"


def _command(args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([COMMAND, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=600)


def _adapter(tmp_path, clipped):
    name = "clipped_softmax" if clipped else "unclipped_softmax"
    source = template.text("reference")
    assert EXACT_ZERO in source
    (tmp_path / f"{name}.py").write_text(source.replace(EXACT_ZERO, CLIPPED) if clipped else source)
    return name


def _explain_file(tmp_path, name):
    """The adapter's weights and context on the spec case's inputs, as explain reads them."""
    sys.path.insert(0, str(tmp_path))
    try:
        module = __import__(name)
    finally:
        sys.path.remove(str(tmp_path))
    case = loader.load().cases[CASE]
    given = {n: inputs.resolve(v, "float64", golden.Goldens()) for n, v in case.inputs.items()}
    result = module.causal_attention(**given)
    path = tmp_path / f"{name}.npz"
    np.savez(path, **given, causal=np.array(True), weights=result["weights"], out=result["context"])
    return path, result["weights"]


@pytest.mark.parametrize("clipped", [True, False], ids=["clipped", "unclipped"])
def test_run_explain_and_fuzz_agree(tmp_path, clipped):
    name = _adapter(tmp_path, clipped)
    path, weights = _explain_file(tmp_path, name)
    if clipped:
        assert 0 < weights[0, 1] < 1e-27  # the tensors under judgement: a hidden key's 1.6e-28
    ran = _command(["run", "--adapter", name, "-q", "-p", "no:cacheprovider", "-k", CASE], tmp_path)
    explained = _command(["explain", path.name], tmp_path)
    fuzzed = _command(["fuzz", "--adapter", name, "--op", "causal_attention", "--examples", "30"], tmp_path)
    verdicts = {"run": ran.returncode, "explain": explained.returncode, "fuzz": fuzzed.returncode}
    texts = {"run": ran.stdout[-1500:], "explain": explained.stdout + explained.stderr, "fuzz": fuzzed.stdout}
    assert set(verdicts.values()) == ({1} if clipped else {0}), (verdicts, texts)
    if clipped:
        assert "a query sees a later key" in ran.stdout, texts["run"]
        assert "weights: BEYOND" in explained.stdout, texts["explain"]
        assert "FINDING causal_attention/weights" in fuzzed.stdout, texts["fuzz"]


@pytest.mark.parametrize("share", [0.5, 2.0])
def test_run_judges_the_reference_by_the_models_allowance(share):
    """`run`'s reference on the same inputs is the model's verdict: a context off by half of the
    model's allowance everywhere passes, one off by twice it fails, and the failure names the model."""
    import types

    from attention_conformance.adapters import reference
    from attention_conformance.run import calls, tolerance_model, verify

    spec, goldens = loader.load(), golden.Goldens()
    case = spec.cases[CASE]
    given = {n: inputs.resolve(v, "float32", goldens) for n, v in case.inputs.items()}
    as64 = {n: np.asarray(v, dtype=np.float64) if isinstance(v, np.ndarray) else v for n, v in given.items()}
    exact = reference.causal_attention(**as64)
    with reference.rounding_to(np.float32):
        plain = np.float32(reference.causal_attention(**as64)["context"])
    derived = tolerance_model.bound("float32", reference.causal_attention, **as64)["context"]
    allowance = tolerance_model.allowed("float32", exact["context"], plain, derived, tolerance_model.model()["float32"])
    signs = np.where(np.arange(allowance.size) % 2, 1, -1).reshape(allowance.shape)
    moved = exact["context"] + share * allowance * signs
    off = types.SimpleNamespace(
        DTYPES=("float32",), causal_attention=lambda **_: {"weights": exact["weights"], "context": moved}
    )
    calls.forget()
    try:
        margin, _, _ = verify.verify(spec, "off", off, case, "context", "float32", goldens)
    except verify.Nonconformance as failure:
        assert share > 1 and "from tolerance model k x B + E + one ULP (float32)" in str(failure), failure
    else:
        assert share < 1 and 0.4 < margin < 0.6, margin
