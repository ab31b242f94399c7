"""A known divergence that only fuzz's generated cases show (case id fuzz_<op>): it bounds what it
excuses when it says `within`, never goes stale in a spec run, and a typo in it is refused."""

import types

import ml_dtypes
import numpy as np
import pytest

from attention_conformance.adapters import reference
from attention_conformance.cases import divergences, loader
from attention_conformance.contract import ids
from attention_conformance.tools import preflight, template
from attention_conformance.tools.fuzz import command, search

SCORES = {"scores": np.array([[0.3, -1.2, 2.0, 0.7], [1.0, 1.0, -0.5, 0.25]])}
NUDGE = 2e-5  # added to one weight: some hundreds of float32 allowances, far below a mistake's size


def _softmax(scores):
    weights = np.asarray(reference.softmax(np.asarray(scores, dtype=np.float64)), dtype=np.float32)
    weights[0, 0] += NUDGE
    return weights


def _fuzzer(declared):
    adapter = types.SimpleNamespace(DTYPES=("float32",), softmax=_softmax)
    fuzzer = search.Fuzzer("nudged", adapter, "float32", ["softmax"])
    fuzzer.divergences = declared
    return fuzzer


def _declared(tmp_path, text):
    path = tmp_path / "known_divergences.yaml"
    path.write_text(text)
    return divergences.load(path)


def test_an_undeclared_nudge_is_a_finding():
    finding = _fuzzer({}).evaluate("softmax", SCORES)
    assert finding and finding.failing == ["weights"], finding
    assert 10 < finding.outputs["weights"].margin < 1e4, finding.messages


def test_within_excuses_up_to_its_margin_and_no_further(tmp_path):
    margin = _fuzzer({}).evaluate("softmax", SCORES).outputs["weights"].margin
    entry = '"test_weights[nudged-float32-fuzz_softmax]":\n  reason: measured\n  within: {}\n'
    wide = _fuzzer(_declared(tmp_path, entry.format(round(margin * 2))))
    assert wide.evaluate("softmax", SCORES) is None
    assert wide.by_op["softmax"].at_declared == 1 and not wide.excused  # judged at the declared margin, not excused
    assert wide.declared_worst == (margin, 1, f"softmax/weights, declared margin {round(margin * 2)}")  # fuzz prints it
    narrow = _fuzzer(_declared(tmp_path, entry.format(round(margin / 2))))
    finding = narrow.evaluate("softmax", SCORES)
    assert finding and f"beyond even margin {round(margin / 2)}:" in finding.messages["weights"], finding


def test_without_within_it_excuses_any_result():
    fuzzer = _fuzzer(
        {ids.test_id("weights", "nudged", "float32", "fuzz_softmax"): divergences.Divergence("any result")}
    )
    assert fuzzer.evaluate("softmax", SCORES) is None and fuzzer.judged == 0  # fuzz then says it judged nothing


def test_a_run_that_judged_nothing_says_so(tmp_path, monkeypatch, capsys):
    (tmp_path / "excused.py").write_text(
        template.text("reference") + '\nKNOWN_DIVERGENCES = {"fuzz_softmax": "every softmax"}\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert command.main("excused", examples=5, chosen=["softmax"], out=str(tmp_path / "out")) == 0
    assert "no finding, but no output was judged" in capsys.readouterr().out


@pytest.mark.parametrize(
    "entry",
    [
        '"test_weights[torch-float32-fuzz_softmax]":\n  reason: no widening\n  within: 1\n',
        '"test_weights[torch-float32-fuzz_softmax]":\n  reason: not a number\n  within: "2x"\n',
        '"test_weights[torch-float32-fuzz_softmax]":\n  reason: YAML 1.1 text\n  within: 2.7e8\n',
    ],
)
def test_within_is_a_number_above_one(tmp_path, entry):
    with pytest.raises(loader.SpecError, match=r"known_divergences.yaml: entry .*: field 'within'") as raised:
        _declared(tmp_path, entry)
    assert ("write 2.7e+8" in str(raised.value)) == ("2.7e8" in entry)


def test_no_spec_case_may_take_a_generated_id(tmp_path):
    text = (loader.SPEC_DIR / "attention.yaml").read_text().replace("  - id: sat\n", "  - id: fuzz_sat\n", 1)
    assert "fuzz_sat" in text
    (tmp_path / "spec.yaml").write_text(text)
    with pytest.raises(loader.SpecError, match="case 'fuzz_sat': field 'id': fuzz_<op> names fuzz's generated"):
        loader.load(tmp_path / "spec.yaml")


def test_a_generated_entry_naming_no_op_is_refused_by_fuzz(tmp_path, monkeypatch, capsys):
    (tmp_path / "typo.py").write_text(
        template.text("reference") + '\nKNOWN_DIVERGENCES = {"fuzz_sofmax/weights": "a typo"}\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert command.main("typo", examples=1, out=str(tmp_path / "out")) == 2
    said = "known divergence 'fuzz_sofmax/weights/*' (test id test_weights[typo-*-fuzz_sofmax]) names no op after fuzz_"
    assert said in capsys.readouterr().err
    import typo

    assert preflight.problems(typo) == ["KNOWN_DIVERGENCES key 'fuzz_sofmax/weights' names no op after fuzz_ (a typo?)"]


def _bfloat16_sums(scale):
    """A softmax whose row sum accumulates in bfloat16 (MLX's precise=False), its weights times `scale`."""

    def softmax(scores):
        terms = np.exp(np.asarray(scores, dtype=np.float64) - np.max(scores, axis=-1, keepdims=True))
        terms = terms.astype(ml_dtypes.bfloat16)
        total = np.zeros(terms.shape[:-1] + (1,), dtype=ml_dtypes.bfloat16)
        for j in range(terms.shape[-1]):
            total = (total + terms[..., j : j + 1]).astype(ml_dtypes.bfloat16)
        return (terms.astype(np.float32) / total.astype(np.float32) * scale).astype(ml_dtypes.bfloat16)

    return softmax


def test_sums_in_dtype_holds_a_half_precision_accumulator_to_its_own_bound(tmp_path):
    long_row = {"scores": np.linspace(-0.01, 0.01, 1024).reshape(1, 1024)}  # the sum stalls at 256
    short_row = {"scores": np.array([[0.3, -1.2, 2.0, 0.7]])}
    entry = '"test_weights[halfsum-bfloat16-fuzz_softmax]":\n  reason: sums in bfloat16\n  sums_in_dtype: true\n'

    def fuzzer(scale, declared):
        adapter = types.SimpleNamespace(DTYPES=("bfloat16",), softmax=_bfloat16_sums(scale))
        found = search.Fuzzer("halfsum", adapter, "bfloat16", ["softmax"])
        found.divergences = declared
        return found

    assert fuzzer(1.0, {}).evaluate("softmax", long_row)  # beyond the model, whose sums are float32's
    assert fuzzer(1.0, _declared(tmp_path, entry)).evaluate("softmax", long_row) is None
    wrong = fuzzer(1.5, _declared(tmp_path, entry)).evaluate("softmax", short_row)  # 50% off, 4 terms
    assert wrong and "beyond even the model summing in bfloat16" in wrong.messages["weights"], wrong


def test_an_entry_holds_in_every_mode_under_each_columns_name_unless_modes_keeps_it_to_some(tmp_path):
    folder = tmp_path / "divergences"
    folder.mkdir()
    (folder / "torch.yaml").write_text(
        '"test_weights[torch-*-padding_fully_masked]":\n  reason: NaN on a hidden row\n'
        '"test_context[torch-float16-sat]":\n  reason: only XLA trips here\n  modes: [compiled]\n'
    )

    def column(mode):
        return divergences.declared(
            "torch" if mode == "eager" else "torch-compiled", types.SimpleNamespace(ADAPTER="torch", MODE=mode), folder
        )

    eager, compiled = column("eager"), column("compiled")
    assert list(eager) == ["test_weights[torch-*-padding_fully_masked]"]
    assert sorted(compiled) == [
        "test_context[torch-compiled-float16-sat]",
        "test_weights[torch-compiled-*-padding_fully_masked]",
    ]
    both = eager | compiled
    # torch's "*" never reaches torch-compiled's tests: each column is judged by its own entries alone.
    assert divergences.reason_for("test_context[torch-compiled-float16-sat]", eager) is None
    assert divergences.reason_for("test_context[torch-compiled-float16-sat]", both) == "only XLA trips here"
    assert divergences.reason_for("test_context[torch-float16-sat]", both) is None


@pytest.mark.parametrize("modes", ["compiled", "[]", "[fast]"])
def test_modes_is_a_list_of_known_modes(tmp_path, modes):
    with pytest.raises(loader.SpecError, match="field 'modes': a list of the modes it holds in"):
        _declared(tmp_path, f'"test_context[torch-float16-sat]":\n  reason: why\n  modes: {modes}\n')


def test_an_entry_keyed_by_a_column_and_an_adapters_own_entry_under_a_mode_hold_in_that_column_alone(tmp_path):
    path = tmp_path / "known.yaml"
    path.write_text('"test_heads[mine-compiled-float64-one_head]":\n  reason: a float32 constant compiled\n')
    own = types.SimpleNamespace(KNOWN_DIVERGENCES={"sat": "everywhere", "compiled": {"cat": "compiled only"}})
    eager = divergences.declared("mine", types.SimpleNamespace(MODE="eager", **vars(own)), path)
    compiled = divergences.declared("mine-compiled", types.SimpleNamespace(MODE="compiled", **vars(own)), path)
    assert sorted(eager) == ["test_*[mine-*-sat]"]
    assert sorted(compiled) == [
        "test_*[mine-compiled-*-cat]",
        "test_*[mine-compiled-*-sat]",
        "test_heads[mine-compiled-float64-one_head]",
    ]
