"""ONNX's own node test cases for Attention (opsets 23-25) and RotaryEmbedding, from the onnx package's generator
(onnx/backend/test/case/node/attention.py and rotaryembedding.py), each stated as an `explain` problem
(onnx_statement.py) and judged by explain: ONNX's expected outputs, and ONNX Runtime's on CPU for the same model.
docs/onnx-cases.md holds the counts this computes and the upstream findings it records; a change on either side (an
ONNX Runtime fix, a new case) fails here until the doc says it. Runs in the onnxruntime environment (tox.ini)."""

import importlib
import re
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper
from onnx.backend.test.case import node as node_cases
from onnx.reference import ReferenceEvaluator
from onnx.reference.ops.op_attention import _compute_attention
from onnx.reference.ops.op_rotary_embedding import rotary_embedding
from onnx_statement import NotStated, formal, presents, results, statement

from attention_conformance.run import tolerance_model
from attention_conformance.tools.explain import command

DOC = Path(__file__).resolve().parent.parent.parent / "docs" / "onnx-cases.md"
OPS = ("Attention", "RotaryEmbedding")
ORT = f"ONNX Runtime {onnxruntime.__version__}"
# What ONNX Runtime cannot run here, by the case's inputs: not a verdict on its results.
NO_BFLOAT16 = "not run: no CPU kernel for bfloat16"
NO_WINDOWS = "not run: no Attention-25 (left_window_size, right_window_size) in this ONNX Runtime"
# Every outcome that is not "conforming", by (whose outputs, data set): the upstream findings docs/onnx-cases.md shows
# with a reproducer each. Fixed upstream, an outcome changes and this test fails until the doc and this table do.
NOT_CONFORMING = {
    ("ort", "test_attention_4d_with_past_and_present_qk_matmul_bias_3d_mask_causal"): (
        "beyond: hidden keys filled with -3.403e+38, not -inf"
    ),
    ("ort", "test_attention_4d_with_past_and_present_qk_matmul_bias_4d_mask_causal"): (
        "beyond: hidden keys filled with -3.403e+38, not -inf"
    ),
    ("ort", "test_attention_4d_diff_heads_mask4d_padded_kv"): (
        "refused: inconsistent total_sequence_length (between attn_mask and past_key and past_value)"
    ),
}


def _cases():
    """ONNX's data sets for the two ops, one a case: its generator seeds np.random with 0 before each export
    (onnx/backend/test/case/base.py), so they are the same every run. Only the two ops' modules are imported:
    collect_testcases imports every operator's (10 s here) and filters once per process. The `_expanded` cases are
    the same data sets run through the function body: one node each is ONNX's own."""
    np.random.seed(0)
    for module in ("attention", "rotaryembedding"):
        importlib.import_module(f"onnx.backend.test.case.node.{module}")
    found = [c for c in node_cases._NodeTestCases if [n.op_type for n in c.model.graph.node] in ([op] for op in OPS)]
    return {c.name: c for c in found}


CASES = _cases()


def _judged(tmp_path, name, arrays):
    """'conforming', 'beyond: <named differences>' or 'not stated: <why>' for FILE.npz holding `arrays`."""
    path = tmp_path / f"{name}.npz"
    np.savez(path, **arrays)
    lines = []
    try:
        code = command.explain(path, out=lines.append, err=lines.append)
    except tolerance_model.BadInput as exc:
        return f"not stated: {str(exc).split(': ', 1)[1]}"
    if code == 0:
        return "conforming"
    differences = [line.split(": ")[1] for line in lines if line.startswith("matches a known difference: ")]
    return "beyond: " + ("; ".join(differences) if differences else "unnamed\n" + "\n".join(lines))


def _feeds(case):
    """(the node, its inputs and ONNX's expected outputs, each {the operator's name: array})."""
    inputs, outputs = case.data_sets[0]
    node, graph = case.model.graph.node[0], case.model.graph
    feeds = formal(node, dict(zip([i.name for i in graph.input], inputs, strict=True)), "inputs")
    return node, feeds, formal(node, dict(zip([o.name for o in graph.output], outputs, strict=True)), "outputs")


def _ort_outputs(case):
    """({the operator's output name: array}, None), or (None, why ONNX Runtime did not run the model on CPU)."""
    return _run(case.model, dict(zip([i.name for i in case.model.graph.input], case.data_sets[0][0], strict=True)))


def _run(model, by_name):
    node = model.graph.node[0]
    try:
        session = onnxruntime.InferenceSession(model.SerializeToString(), _quiet(), providers=["CPUExecutionProvider"])
        produced = session.run(None, by_name)
    except REFUSALS as exc:
        said = str(exc)
        return None, "refused: " + (said.rsplit(" was false. ", 1)[1] if " was false. " in said else said).strip()
    return formal(node, dict(zip([o.name for o in model.graph.output], produced, strict=True)), "outputs"), None


_STATE = onnxruntime.capi.onnxruntime_pybind11_state
REFUSALS = (_STATE.Fail, _STATE.NotImplemented, _STATE.InvalidGraph, _STATE.InvalidArgument, _STATE.RuntimeException)


def _quiet():
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4  # its refusals are recorded here, not logged
    return options


def _not_run(case, error):
    """Why ONNX Runtime's outputs of `case` are not judged, from the case's own inputs; the error's text otherwise."""
    node, feeds, _ = _feeds(case)
    if any(a.dtype == ml_dtypes.bfloat16 for a in feeds.values()):
        return NO_BFLOAT16
    if case.model.opset_import[0].version >= 25 and node.op_type == "Attention":
        return NO_WINDOWS
    return error


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """{(whose, case name): outcome} for ONNX's expected outputs ("onnx") and ONNX Runtime's ("ort")."""
    tmp_path = tmp_path_factory.mktemp("onnx_cases")
    found = {}
    for name, case in CASES.items():
        node, feeds, expected = _feeds(case)
        try:
            stated = statement(node, feeds)
        except NotStated as exc:
            found["onnx", name] = found["ort", name] = f"not stated: {exc}"
            continue
        found["onnx", name] = _judged(tmp_path, f"{name}.onnx", stated | results(node, expected))
        produced, error = _ort_outputs(case)
        if produced is None:
            found["ort", name] = _not_run(case, error)
        else:
            found["ort", name] = _judged(tmp_path, f"{name}.ort", stated | results(node, produced))
    return found


def table(outcomes):
    """docs/onnx-cases.md's table, from the outcomes."""
    by_op = {}
    for case in CASES.values():
        key = f"{case.model.graph.node[0].op_type}-{case.model.opset_import[0].version}"
        by_op[key] = by_op.get(key, 0) + 1
    rows = [
        "| outputs judged | data sets | stated | conforming | beyond, named | beyond, unnamed | not judged |",
        "|---|---|---|---|---|---|---|",
    ]
    for whose, label in (("onnx", f"ONNX {onnx.__version__}'s expected"), ("ort", f"{ORT}'s (CPU)")):
        mine = [outcome for (who, _), outcome in sorted(outcomes.items()) if who == whose]
        unnamed = sum(o.startswith("beyond: unnamed") for o in mine)
        skipped = [_SKIPPED.get(o, "refused") for o in mine if o.startswith(("not run", "refused"))]
        rows.append(
            f"| {label} | {len(mine)} | {sum(not o.startswith('not stated') for o in mine)} | "
            f"{mine.count('conforming')} | {sum(o.startswith('beyond') for o in mine) - unnamed} | {unnamed} | "
            + (", ".join(f"{skipped.count(why)} {why}" for why in sorted(set(skipped))) or "0")
            + " |"
        )
    return "\n".join(rows) + "\n\nData sets by operator and opset: " + ", ".join(f"{k} {n}" for k, n in by_op.items())


_SKIPPED = {NO_BFLOAT16: "bfloat16 (no CPU kernel)", NO_WINDOWS: "Attention-25 (not in this version)"}


def every_case(outcomes):
    """docs/onnx-cases.md's record of each data set: its outcome for ONNX's expected outputs and ONNX Runtime's."""
    rows = ["| data set | ONNX's expected outputs | ONNX Runtime's |", "|---|---|---|"]
    rows += [f"| `{n}` | {_said(outcomes['onnx', n])} | {_said(outcomes['ort', n])} |" for n in CASES]
    return "\n".join(rows)


def _said(outcome):
    return "not run: " + _SKIPPED[outcome] if outcome in _SKIPPED else outcome


def test_there_are_onnxs_101_data_sets(outcomes):
    assert len(CASES) == 101, sorted(CASES)  # a new onnx adds cases: state them, then update docs/onnx-cases.md


def test_every_data_set_is_stated_and_all_but_the_documented_ones_conform(outcomes):
    unstated = {key: o for key, o in outcomes.items() if o.startswith("not stated")}
    assert unstated == {}, unstated
    differing = {key: o for key, o in outcomes.items() if o != "conforming" and o not in (NO_BFLOAT16, NO_WINDOWS)}
    assert differing == NOT_CONFORMING, "\n".join(f"{k}: {o}" for k, o in sorted(differing.items()))
    not_run = sorted(n for (who, n), o in outcomes.items() if who == "ort" and o in (NO_BFLOAT16, NO_WINDOWS))
    assert len(not_run) == 16, not_run


def test_the_doc_states_these_counts_and_each_finding(outcomes):
    text = DOC.read_text()
    for generated in (table(outcomes), every_case(outcomes)):
        assert generated in text, f"docs/onnx-cases.md is stale; it should hold:\n\n{generated}"
    for _, name in NOT_CONFORMING:
        assert f"`{name}`" in text, f"docs/onnx-cases.md does not name {name}"
    assert "onnx-cases.md" in (DOC.parent / "tolerances.md").read_text(), "docs/tolerances.md links the page"


def test_present_key_and_value_are_the_cache_and_the_new_keys_bit_for_bit():
    checked = 0
    for case in CASES.values():
        node, feeds, expected = _feeds(case)
        produced, _ = _ort_outputs(case)
        for name, want in presents(node, feeds).items():
            for whose, got in (("onnx", expected), ("ort", produced)):
                if got is not None and name in got:
                    assert np.array_equal(got[name], want), (whose, case.name, name)
                    checked += 1
    assert checked == 2 * 21 + 2 * 20  # 21 cases with a past cache: ONNX's two presents each, ORT's of the 20 it runs


def _wrong(name, arrays, out=None, q_rotated=None):
    """The case stated as ONNX states it, with a result computed under another convention."""
    node, feeds, _ = _feeds(CASES[name])
    result = dict(out=out) if q_rotated is None else dict(q_rotated=q_rotated)
    return statement(node, feeds) | result


def test_the_statements_bind_a_result_under_another_convention_is_named(tmp_path):
    """ONNX's own computation (the reference the generator uses) with one convention changed: each is beyond the
    case as stated and named, so no statement above conforms by accident of being loose."""
    wrong = {}
    _, f, _ = _feeds(CASES["test_attention_4d_causal"])
    S = f["K"].shape[2]
    bottom_right = _compute_attention(f["Q"], f["K"], f["V"], is_causal=1, nonpad_kv_seqlen=np.full(2, S))[0]
    wrong["causal aligned bottom-right"] = _wrong("test_attention_4d_causal", f, out=bottom_right)
    name = "test_attention_4d_with_past_and_present_qk_matmul_bias_3d_mask_causal"
    _, f, _ = _feeds(CASES[name])
    k, v = (np.concatenate([f[past], f[new]], axis=2) for past, new in (("past_key", "K"), ("past_value", "V")))
    top_left = _compute_attention(f["Q"], k, v, attn_mask=f["attn_mask"], is_causal=1)[0]  # the cache's offset lost
    wrong["top-left causal alignment"] = _wrong(name, f, out=top_left)
    _, f, _ = _feeds(CASES["test_attention_4d_causal_nonpad_batch_prefill"])
    unpadded = _compute_attention(f["Q"], f["K"], f["V"], is_causal=1)[0]
    wrong["per-row valid length ignored (causal top-left)"] = _wrong(
        "test_attention_4d_causal_nonpad_batch_prefill", f, out=unpadded
    )
    _, f, _ = _feeds(CASES["test_attention_4d_attn_mask_bool"])
    inverted = _compute_attention(f["Q"], f["K"], f["V"], attn_mask=~f["attn_mask"])[0]
    wrong["inverted mask polarity"] = _wrong("test_attention_4d_attn_mask_bool", f, out=inverted)
    _, f, _ = _feeds(CASES["test_attention_local_window"])
    wider = _compute_attention(f["Q"], f["K"], f["V"], is_causal=1, left_window_size=3)[0]
    wrong["a window one key wider"] = _wrong("test_attention_local_window", f, out=wider)
    _, f, _ = _feeds(CASES["test_rotary_embedding"])
    turned = rotary_embedding(f["input"], f["cos_cache"], f["sin_cache"], position_ids=f["position_ids"], interleaved=1)
    wrong["RoPE with interleaved pairs"] = _wrong("test_rotary_embedding", f, q_rotated=turned)
    at_zero = rotary_embedding(f["input"], f["cos_cache"], f["sin_cache"], position_ids=np.tile(np.arange(3), (2, 1)))
    wrong["RoPE position_ids ignored"] = _wrong("test_rotary_embedding", f, q_rotated=at_zero)
    for difference, arrays in wrong.items():
        outcome = _judged(tmp_path, "wrong", arrays)
        assert outcome.startswith("beyond: ") and difference in outcome[8:].split("; "), f"{difference}: {outcome}"


def _mode_0_with_a_cap():
    """docs/onnx-cases.md's second finding, as its reproducer builds it: qk_matmul_output mode 0 with a soft cap."""
    node = helper.make_node("Attention", ["Q", "K", "V"], ["Y", "", "", "QK"], softcap=1.0, qk_matmul_output_mode=0)
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Q", "K", "V", "Y", "QK")]
    graph = helper.make_graph([node], "softcap", io[:3], io[3:])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)
    rng = np.random.default_rng(0)
    feeds = {n: (2 * rng.standard_normal((1, 2, 3, 8))).astype(np.float32) for n in ("Q", "K", "V")}
    return model, node, feeds


def test_onnx_reference_caps_mode_0s_scores_where_the_operators_text_and_onnx_runtime_do_not(tmp_path):
    """onnx.reference writes the capped scores as qk_matmul_output mode 0 (ONNX's text: the qk matmul's output; mode
    1 is after the cap): a documented upstream difference, named by explain. Fixed there, this fails."""
    model, node, feeds = _mode_0_with_a_cap()
    reference = formal(node, dict(zip(("Y", "QK"), ReferenceEvaluator(model).run(None, feeds), strict=True)), "outputs")
    ort, _ = _run(model, feeds)
    stated = statement(node, feeds)
    produced = {
        whose: _judged(tmp_path, whose, stated | results(node, got))
        for whose, got in (("onnx", reference), ("ort", ort))
    }
    assert produced == {"onnx": "beyond: scaled holds capped", "ort": "conforming"}, produced
    assert "onnx.reference" in DOC.read_text() and "scaled holds capped" in DOC.read_text()


def test_the_upstream_reproducers_in_the_doc_run_and_print_what_it_says():
    """Each reproducer in docs/onnx-cases.md ("Upstream findings") run as it stands: ten lines, onnx, onnxruntime and
    NumPy only; its printed lines are the doc's."""
    text = DOC.read_text()
    blocks = re.findall(r"```python\n(.*?)```\n```\n(.*?)```", text, re.S)
    assert len(blocks) == 4, "four reproducers, each followed by what it prints"
    for code, printed in blocks:
        assert len(code.strip().splitlines()) <= 12, code
        assert not re.search(r"^(from|import) attention_conformance", code, re.M), code
        lines = _printed(code)
        assert "\n".join(lines).strip() == printed.strip(), f"{code}\nprints\n" + "\n".join(lines)


def _printed(code):
    """What `code` prints, each print's arguments joined by a space, as print does."""
    lines = []
    exec(compile(code, "reproducer", "exec"), {"print": lambda *said: lines.append(" ".join(map(str, said)))})
    return lines
