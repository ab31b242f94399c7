"""A malformed spec is refused in one line that names the file, the case and the field."""

import re

import pytest
import yaml
from spec_samples import MALFORMED, VALID

from attention_conformance.cases import loader
from attention_conformance.contract import ops, registry
from attention_conformance.paths import DOCS_DIR, DOCUMENTS_DIR, SPEC_DIR


def _write(tmp_path, text):
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    return path


def test_the_valid_base_loads(tmp_path):
    assert list(loader.load_file(_write(tmp_path, VALID)).cases) == ["sat"]


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_spec_is_refused_in_one_line(tmp_path, name):
    old, new, fragments = MALFORMED[name]
    assert old in VALID, "the corpus entry no longer edits the base spec"
    path = _write(tmp_path, VALID.replace(old, new, 1))
    before = path.read_bytes()
    with pytest.raises(loader.SpecError) as info:
        loader.load_file(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    for fragment in fragments:
        assert fragment in message
    assert path.read_bytes() == before


def test_binary_garbage_is_refused(tmp_path):
    path = tmp_path / "garbage.yaml"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(loader.SpecError, match="not UTF-8"):
        loader.load_file(path)


def test_oversized_spec_is_refused_before_parsing(tmp_path):
    path = _write(tmp_path, VALID + "#" * loader.MAX_SPEC_BYTES)
    with pytest.raises(loader.SpecError, match="over the"):
        loader.load_file(path)


def test_deeply_nested_spec_is_refused(tmp_path):
    path = _write(tmp_path, VALID.replace("[1.0, 2.0]", "[" * 5000 + "1" + "]" * 5000))
    with pytest.raises(loader.SpecError):
        loader.load_file(path)


def test_executable_tags_build_nothing(tmp_path):
    # SafeLoader refuses the tag before constructing anything, so nothing ran.
    marker = tmp_path / "ran"
    path = _write(tmp_path, VALID.replace("[1.0, 2.0]", f"!!python/object/apply:os.system ['touch {marker}']"))
    with pytest.raises(loader.SpecError):
        loader.load_file(path)
    assert not marker.exists()


def test_the_repository_spec_loads_and_cites_real_lines():
    """Every quote in the spec is a line (or a line's text) of its document, whitespace-insensitive."""
    loaded = loader.load()
    docs = {key: " ".join((DOCUMENTS_DIR / name).read_text().split()) for key, name in loaded.documents.items()}
    unmatched = []
    for case in loaded.cases.values():
        if case.erratum and " ".join(case.erratum["claim"].split()) not in docs[case.erratum["doc"]]:
            unmatched.append((case.id, "erratum", case.erratum["claim"]))
        for exp in case.expect.values():
            if exp.source:
                quote = " ".join(exp.source["quote"].split())
                if quote not in docs[exp.source["doc"]]:
                    unmatched.append((case.id, exp.output, quote))
    assert unmatched == []


def test_spec_yaml_has_no_duplicate_keys_or_anchors_lost():
    text = (SPEC_DIR / "attention.yaml").read_text()
    assert yaml.safe_load(text)["cases"]


def test_every_erratum_is_listed_in_the_readme():
    readme = (SPEC_DIR.parent / "docs" / "cases.md").read_text()
    errata = readme[readme.index("## Errata") : readme.index("## Golden data")]
    missing = [c.id for c in loader.load().cases.values() if c.erratum and f"`{c.id}`" not in errata]
    assert missing == []


def test_the_contract_page_table_is_the_contract():
    """One row per op, with exactly the parameters of ops.OPS, and every output of a multi-output op named: in the
    page `attention-conformance docs contract` prints, installed with the package."""
    readme = (DOCS_DIR / "contract.md").read_text()
    table = readme[readme.index("# The adapter contract") : readme.index("Besides the functions")]
    rows = dict(re.findall(r"^\| `(\w+\([^`]*\))` \| ([^|]*)\|", table, re.M))
    expected = {
        f"{op}({', '.join(params)})": outputs
        for op, params in ops.CONTRACT.items()
        for outputs in [ops.OPS[op][1] if op in ops.OPS else ()]
    }
    assert set(rows) == set(expected), sorted(set(rows) ^ set(expected))
    unnamed = [
        (call, out) for call, outs in expected.items() if len(outs) > 1 for out in outs if f'"{out}"' not in rows[call]
    ]
    assert unnamed == [], unnamed


GPT2_SMALL = {"width": 768, "num_heads": 12}  # GPT-2 small's config: n_embd 768, n_head 12


def _is_gpt2_shape(inputs):
    x = inputs.get("x")
    return (
        isinstance(x, dict)
        and x.get("shape", [None])[-1] == GPT2_SMALL["width"]
        and inputs.get("num_heads") == GPT2_SMALL["num_heads"]
    )


def test_every_porting_and_gpt2_shaped_layer_case_runs_through_gpt2s_layer_too():
    """An adapter whose only layer is GPT-2's (HF's GPT2Attention, nanoGPT) must meet every checkpoint and
    GPT-2's shape: each `layer: mha` case that ports a checkpoint (other than the reference's) or has GPT-2
    small's shape has a `layer: gpt2` case with the same inputs otherwise, causal as GPT-2's layer is."""
    cases = [c for c in loader.load().cases.values() if c.op == "attention_module"]

    def rest(case):  # what must match: everything but the layer and its causal flag
        return {k: v for k, v in case.inputs.items() if k not in ("layer", "causal")}

    gpt2 = [rest(c) for c in cases if c.inputs["layer"] == "gpt2" and c.inputs["causal"] is True]
    needing = [
        c
        for c in cases
        if c.inputs["layer"] == "mha" and (c.inputs["checkpoint"] != "reference" or _is_gpt2_shape(c.inputs))
    ]
    assert any(_is_gpt2_shape(c.inputs) for c in needing), "no GPT-2-shaped layer case found: the shape test is stale"
    missing = [c.id for c in needing if rest(c) not in gpt2]
    assert missing == [], f"layer: mha cases without a layer: gpt2 counterpart: {missing}"


def test_every_parameter_is_described_for_the_self_check():
    """The self-check builds its tiny inputs from ops.PARAMETERS: a parameter missing there would make
    every adapter's self-check fail on the suite's omission."""
    params = {p for params, _ in ops.OPS.values() for p in params}
    assert params - set(ops.PARAMETERS) == set(), "parameters without a kind in ops.PARAMETERS"
    assert set(ops.CHOICES) <= set(ops.PARAMETERS)


def test_the_contract_states_the_forms_the_spec_feeds_each_op():
    """ops.FORMS says, per op, whether token tensors come as one row, [T, D] or [B, T, D]: exactly
    the forms the spec's cases use, so an adapter written to the table takes every case's inputs."""
    from attention_conformance.cases import golden, inputs

    rank = {"tokens": 2, "square": 2, "mask": 2}  # a kind's rank unbatched; a row has one axis fewer, a batch one more
    goldens, fed = golden.Goldens(), {}
    for case in loader.load().cases.values():
        for name, value in case.inputs.items():
            kind = ops.PARAMETERS[name]
            if kind in rank:
                ndim = inputs.resolve(value, "float32", goldens).ndim
                fed.setdefault(case.op, set()).add({1: "row", 2: "unbatched", 3: "batched"}[ndim - rank[kind] + 2])
    assert {op: set(forms) for op, forms in ops.FORMS.items()} == fed


def test_a_new_parameter_unknown_to_the_contract_is_the_suites_fault_not_the_adapters(monkeypatch):
    from attention_conformance.adapters import reference
    from attention_conformance.tools import preflight

    monkeypatch.setitem(ops.OPS, "tempered_softmax", (("scores", "temperature"), ("weights",)))
    monkeypatch.setattr(
        reference, "tempered_softmax", lambda scores, temperature: reference.softmax(scores), raising=False
    )
    problems = preflight.problems(reference)
    assert any("does not describe parameter(s) temperature" in p and "not in your adapter" in p for p in problems), (
        problems
    )


def test_not_applicable_keys_are_validated_like_known_divergence_keys():
    ok = [
        "float16",
        "attention_module",
        "layer_mha_small",
        "attention_module/weights",
        "layer_gpt2_small/weights",
        "layer=mha",
        "checkpoint=keras",
        "causal=true",
    ]
    assert [k for k in ok if registry.not_applicable_key_problem(k)] == []
    wrong = {
        "attention_module/wieghts": "has no output 'wieghts'",
        "layer=bert": "layer takes mha, ",
        "colour=red": "not a parameter",
        "Attention Module": "must be a dtype, an op or a case id",
        "float16/context": "write the dtype alone",
    }
    for key, fragment in wrong.items():
        assert fragment in (registry.not_applicable_key_problem(key) or ""), key


def test_the_readme_states_each_ops_forms_as_the_contract_does():
    text = (SPEC_DIR.parent / "docs" / "contract.md").read_text()
    section = text[text.index("**Shapes.**") : text.index("`check`'s tiny inputs")]
    words = {
        "one row (": {"row", "unbatched"},
        "one row only": {"row"},
        "unbatched ([T, D], scores [T, S]) only": {"unbatched"},
        "unbatched or batched": {"unbatched", "batched"},
        "batched only": {"batched"},
    }
    stated = {}
    for line in section.splitlines():
        if line.startswith("- "):
            forms = next(f for w, f in words.items() if line[2:].startswith(w))
            stated |= {op: forms for op in re.findall(r"`(\w+)`", line.split(":", 1)[1])}
    assert stated == {op: set(forms) for op, forms in ops.FORMS.items()}
