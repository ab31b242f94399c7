"""A declared convention is judged on its side (run/verify.py: judged, with sides.py's oracle): the textbook's NaN
row, a finite fill's uniform row and a top-left causal flag pass where they compute that side, fail where they are
wrong elsewhere or one key off, and go stale where they meet the spec's own convention; a layer's default is judged
by the entry's own expectations; the entry's side and expectations are refused, named, where malformed."""

import types

import numpy as np
import pytest
import yaml

from attention_conformance.cases import divergences, golden, loader
from attention_conformance.margin import Nonconformance
from attention_conformance.run import calls, declarations, verify

SPEC = loader.load()
GOLDENS = golden.Goldens()
pytestmark = pytest.mark.usefixtures("fresh_oracle")


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _masked(x, w_query, w_key, w_value, mask, fill=-np.inf, off=1.0):
    """The textbook in NumPy: `fill` where a key is hidden (-inf: 0/0 on a fully masked row), then the softmax."""
    q, k, v = (np.asarray(x) @ np.asarray(w) for w in (w_query, w_key, w_value))
    with np.errstate(invalid="ignore"):
        weights = _softmax(np.where(mask, fill, q @ np.swapaxes(k, -1, -2) / np.sqrt(k.shape[-1])))
    return {"weights": weights * off, "context": weights @ v * off}


def _fact(text):
    return divergences.parse(yaml.safe_load(text), "test: entry 'the_fact'", fact="the_fact", source="test")


NAN = "kind: convention\nside: {fully_masked_rows: nan}\nreason: the textbook's 0/0\n"


def _judged(masked_attention, divergence, output="weights", dtype="float64", case="padding_fully_masked"):
    calls.forget()  # one adapter name, many adapters: no outputs kept from the last
    adapter = types.SimpleNamespace(DTYPES=(dtype,), masked_attention=masked_attention)
    return verify.judged(SPEC, "mine", adapter, SPEC.cases[case], output, dtype, GOLDENS, divergence)


@pytest.mark.parametrize("output", ["weights", "context"])
def test_the_textbooks_nan_row_passes_on_its_declared_side(output):
    margin, _, _, declared = _judged(lambda **a: _masked(**a), _fact(NAN), output)
    assert margin < 1 and declared["side"] == "fully_masked_rows=nan" and declared["kind"] == "convention"


def test_a_nan_row_with_the_other_rows_one_percent_off_fails_on_its_side():
    with pytest.raises(Nonconformance, match="judged on the side fully_masked_rows=nan that 'the_fact' declares"):
        _judged(lambda **a: _masked(**a, off=1.01), _fact(NAN))


def test_zeros_where_the_nan_side_is_declared_are_a_stale_declaration():
    def zeros_row(**a):
        found = _masked(**a)
        return {k: np.nan_to_num(v) for k, v in found.items()}

    with pytest.raises(verify.StaleDeclaration, match="follows the spec's convention"):
        _judged(zeros_row, _fact(NAN))


def test_a_finite_fill_gives_the_uniform_side_in_float32():
    uniform = _fact("kind: convention\nside: {fully_masked_rows: uniform}\nreason: a finfo.min fill\n")
    fill = np.finfo(np.float32).min
    for output in ("weights", "context"):
        assert _judged(lambda **a: _masked(**a, fill=fill), uniform, output, "float32")[0] < 1
    with pytest.raises(Nonconformance, match="fully_masked_rows=uniform"):  # NaN is not that side
        _judged(lambda **a: _masked(**a), uniform, "context", "float32")


def _top_left_flag(shift):
    """A causal flag over the block's queries that lets query i see keys 0..i + shift (top left, shift 0)."""

    def causal_flag(x, w_query, w_key, w_value, start):
        T = np.shape(x)[-2]
        i, j = np.arange(T - start)[:, None], np.arange(T)[None, :]
        q, k, v = x[..., start:, :] @ w_query, x @ w_key, x @ w_value
        return _softmax(np.where(j > i + shift, -np.inf, q @ np.swapaxes(k, -1, -2) / np.sqrt(k.shape[-1]))) @ v

    return causal_flag


@pytest.mark.parametrize("shift, passes", [(0, True), (1, False)])
def test_a_top_left_flag_passes_on_its_side_and_one_key_off_fails(shift, passes):
    top_left = _fact("kind: convention\nside: {causal_alignment: top_left}\nreason: the flag's alignment\n")
    adapter = types.SimpleNamespace(DTYPES=("float32",), causal_flag=_top_left_flag(shift))
    case = SPEC.cases["decode_flag_chunk"]
    if passes:
        assert verify.judged(SPEC, "mine", adapter, case, "context", "float32", GOLDENS, top_left)[0] < 1
    else:
        with pytest.raises(Nonconformance, match="causal_alignment=top_left"):
            verify.judged(SPEC, "mine", adapter, case, "context", "float32", GOLDENS, top_left)


def test_a_precision_covering_a_conventions_test_judges_its_side_at_that_accuracy(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        f"nan_row:\n  {NAN.replace(chr(10), chr(10) + '  ')}tests: ['test_*[mine-*-padding_fully_masked]']\n"
        "inside:\n  kind: precision\n  computed_in: float32\n  reason: r\n  tests: ['test_*[mine-float64-*]']\n"
    )
    both = declarations.one_for("test_weights[mine-float64-padding_fully_masked]", divergences.load(path, "mine"))
    assert (both.fact, both.precision.fact) == ("nan_row", "inside")

    def in_float32(**a):
        found = _masked(**{k: np.asarray(v, np.float32) for k, v in a.items()})
        return {k: v.astype(np.float64) for k, v in found.items()}

    with pytest.raises(Nonconformance):  # float32's error, judged at float64 on the side alone
        _judged(in_float32, both.beside(None))
    declared = _judged(in_float32, both)[3]
    assert declared["side"] == "fully_masked_rows=nan" and declared["precision"]["fact"] == "inside"


def test_a_layers_default_is_judged_by_the_entrys_own_expectation():
    biases = _fact("kind: convention\nexpect: {bias: {equals: true}}\nreason: biases by default\n")
    case = SPEC.cases["layer_defaults"]

    def layer_defaults(d_in, num_heads, seed, bias=True):
        return {"bias": bias, "dropout": 0.0, "averaged_weights": False, "w_query": np.zeros((d_in, d_in))}

    adapter = types.SimpleNamespace(DTYPES=("float32",), layer_defaults=layer_defaults)
    assert verify.judged(SPEC, "mine", adapter, case, "bias", "float32", GOLDENS, biases)[3]["side"] == (
        "bias as its entry states"
    )
    adapter.layer_defaults = lambda d_in, num_heads, seed: layer_defaults(d_in, num_heads, seed, bias=False)
    calls.forget()
    with pytest.raises(verify.StaleDeclaration):
        verify.judged(SPEC, "mine", adapter, case, "bias", "float32", GOLDENS, biases)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("side: {fully_masked_row: nan}", "field 'side': 'fully_masked_row' is not a split"),
        ("side: {fully_masked_rows: zeros}", "field 'side': fully_masked_rows: 'zeros' is not another side"),
        ("side: nan", "field 'side': a mapping"),
        ("expect: {bias: {reference: true}}", "field 'expect.bias.reference': a convention states"),
        ("expect: {bias: {equals: maybe}}", "field 'expect.bias.equals'"),
        ("expect: {nothing: {equals: true}}", "field 'expect.nothing'"),
    ],
)
def test_a_conventions_side_and_expectations_are_checked_and_named(text, field):
    with pytest.raises(loader.SpecError, match=f"test: entry 'the_fact': {field}"):
        _fact(f"kind: convention\nreason: r\n{text}\n")


def test_every_built_in_convention_states_its_side_or_its_expectations():
    unjudged = sorted({d.fact for d in divergences.read().values() if d.kind == "convention" and d.unbounded})
    assert unjudged == []


def test_a_split_the_test_does_not_have_is_refused_not_judged_on_the_spec_side():
    """An outside trial: {causal_alignment: top_left} on a fully masked row passed as the spec's zeros, its side
    named in the message; and an extra split beside the right one went unremarked."""
    for side in ("{causal_alignment: top_left}", "{fully_masked_rows: nan, causal_alignment: top_left}"):
        other = _fact(f"kind: convention\nside: {side}\nreason: r\n")
        with pytest.raises(Nonconformance, match="causal_alignment=top_left, which 'the_fact' .* changes nothing here"):
            _judged(lambda **a: _masked(**a), other)
