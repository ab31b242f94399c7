"""`attention-conformance check` (attention_conformance/tools/preflight.py) on the reference adapter and on copies
of it with one function wrong: the reference is ready to run; a function that returns the wrong shape, dtype
or keys, or raises, is named in one line saying what the contract expects, and nothing else is blamed."""

import importlib.util

import numpy as np
import pytest

from attention_conformance.adapters import reference
from attention_conformance.tools import preflight, template


def _copy(tmp_path, name, wrong):
    """The reference adapter's source with `wrong` appended, imported as the adapter `name`. `wrong` replaces
    a function no other one of the reference calls, so only its own check can fail."""
    path = tmp_path / f"{name}.py"
    path.write_text(template.text("reference") + "\n\n" + wrong)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_adapter_is_ready_to_run():
    assert preflight.problems(reference) == []


@pytest.mark.parametrize(
    "wrong, said",
    [
        (
            "def dot_columns(x, w):\n    return np.zeros(2)\n",
            "dot_columns(x, w): output 'by_hand' has shape [2], should be [4]",
        ),
        (
            "_fused = fused_attention\n\n\n"
            "def fused_attention(x, w_query, w_key, w_value, num_heads, causal):\n"
            "    return _fused(x, w_query, w_key, w_value, num_heads, causal).astype(np.float32)\n",
            "fused_attention(x, w_query, w_key, w_value, num_heads, causal=True) with unbatched inputs: "
            "output 'heads' has dtype float32, should be float64 (the dtype it was given)",
        ),
        (
            "def mask_conventions(x, w_query, w_key, w_value, mask, api, fill):\n"
            "    raise RuntimeError('no kernel for this shape\\nsecond line')\n",
            "mask_conventions(x, w_query, w_key, w_value, mask, api='bool', fill='neg_inf') raises RuntimeError: "
            "no kernel for this shape (in float64, on tiny inputs)",
        ),
        (
            "_exercise = exercise_3_1\n\n\n"
            "def exercise_3_1(x, w_query, w_key, w_value):\n"
            "    return {'context': _exercise(x, w_query, w_key, w_value)['context']}\n",
            "exercise_3_1(x, w_query, w_key, w_value) returned ['context'], "
            "should return a dict with ['context', 'context_v2']",
        ),
        (  # `run` turns warnings into errors, so check does (an outside trial's adapter passed check, then failed run)
            "import warnings\n\n_dot_columns = dot_columns\n\n\n"
            "def dot_columns(x, w):\n"
            "    warnings.warn('the _compile flag is deprecated', DeprecationWarning)\n"
            "    return _dot_columns(x, w)\n",
            "dot_columns(x, w) warns DeprecationWarning: the _compile flag is deprecated (in float64, on tiny inputs): "
            "`run` fails a test on a warning",
        ),
    ],
    ids=["shape", "dtype", "raises", "keys", "warns"],
)
def test_one_wrong_function_is_one_line_naming_it(tmp_path, wrong, said):
    assert preflight.problems(_copy(tmp_path, "almost_reference", wrong)) == [said]


def test_a_function_declared_not_applicable_is_not_called(tmp_path):
    wrong = (
        "def dropout(weights, p, seed):\n    raise NotImplementedError('no dropout')\n\n\n"
        "NOT_APPLICABLE = NOT_APPLICABLE | {'dropout': 'this framework has no seeded dropout'}\n"
    )
    assert preflight.problems(_copy(tmp_path, "no_dropout", wrong)) == []


def test_tiny_inputs_are_the_same_numbers_for_the_adapter_and_the_reference():
    a = preflight.tiny_inputs("attention", "unbatched", "float32", choose=None)
    b = preflight.tiny_inputs("attention", "unbatched", "float64", choose=None)
    assert a["x"].shape == (preflight.T, preflight.D) and a["x"].dtype == np.float32
    np.testing.assert_array_equal(a["x"], b["x"])  # float32 numbers, held in float64 for the reference


_NO_CAP_WITH_SINKS = (
    "_decoder = decoder_attention\n\n\n"
    "def decoder_attention(x, w_query, w_key, w_value, num_heads, num_kv_heads, pairing, window, cap, sinks):\n"
    "    if cap and (np.asarray(sinks, dtype=np.float64) != -np.inf).any():\n"
    "        raise NotImplementedError('a soft cap and sinks together')\n"
    "    return _decoder(x, w_query, w_key, w_value, num_heads, num_kv_heads, pairing, window, cap, sinks)\n"
)


def test_a_declared_case_excuses_its_combination_and_the_op_is_still_called(tmp_path):
    # transformers' eager functions take a soft cap or sinks, never both (issue 58): the case that has both is
    # declared, and check calls the op with each of them switched off instead, saying so.
    declared = (
        _NO_CAP_WITH_SINKS + "\n\nNOT_APPLICABLE = NOT_APPLICABLE | {'decoder_mqa_interleaved': 'no cap with sinks'}\n"
    )
    said = []
    assert preflight.problems(_copy(tmp_path, "eager_decoder", declared), said=said) == []
    assert said == [
        "decoder_attention() with cap and sinks set together: not called, declared not applicable "
        "(case decoder_mqa_interleaved); called with cap off, and with sinks off"
    ]
    undeclared = preflight.problems(_copy(tmp_path, "eager_decoder_undeclared", _NO_CAP_WITH_SINKS))
    assert len(undeclared) == 1 and "raises NotImplementedError: a soft cap and sinks together" in undeclared[0]


def test_each_switched_off_call_is_still_checked(tmp_path):
    # A wrong output on a call made with sinks off is named, with what was switched off.
    wrong = _NO_CAP_WITH_SINKS.replace(
        "    return _decoder(", "    if not cap:\n        return np.zeros(2)\n    return _decoder("
    )
    wrong += "\n\nNOT_APPLICABLE = NOT_APPLICABLE | {'decoder_mqa_interleaved': 'no cap with sinks'}\n"
    found = preflight.problems(_copy(tmp_path, "eager_decoder_wrong", wrong))
    assert len(found) == 1 and ", cap off)" in found[0] and "has shape [2]" in found[0], found
