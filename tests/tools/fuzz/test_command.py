"""The fuzz command (attention_conformance/tools/fuzz/command.py): wrong usage exits 2 with one line before any
work, a correct adapter exits 0 and says what it judged, a wrong one exits 1 and names its files."""

import re

import pytest

from attention_conformance.tools import template
from attention_conformance.tools.fuzz import command


@pytest.mark.parametrize(
    "kwargs, said",
    [
        ({"examples": 0}, "--examples must be at least 1"),
        ({"chosen": ["draw"]}, "--op draw is not a forward op the fuzzer covers"),
        ({"adapter_name": "no_such_adapter_module"}, "does not import"),
        ({"dtype": "float16"}, "reference does not declare float16"),
    ],
    ids=["no examples", "an op it does not cover", "an adapter that does not import", "an undeclared dtype"],
)
def test_wrong_usage_exits_2_in_one_line(kwargs, said, tmp_path, capsys):
    arguments = {"adapter_name": "reference", "examples": 1, "out": str(tmp_path / "out")} | kwargs
    assert command.main(**arguments) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and said in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_the_reference_exits_0_and_says_what_it_judged(tmp_path, capsys):
    assert command.main("reference", examples=8, chosen=["softmax"], out=str(tmp_path / "out")) == 0
    lines = capsys.readouterr().out.splitlines()
    # each op's share (issue 58), and its long share (issue 73)
    assert lines[0] == "  softmax: 9 distinct cases of 9 drawn (1 at a model's lengths), 9 outputs judged", lines
    assert lines[-1].startswith("ok: reference float64: 9 distinct cases over 1 of 1 ops (--examples 8 per op")
    assert "no finding" in lines[-1]


def test_a_wrong_adapter_exits_1_and_names_the_case_and_the_reproducer(tmp_path, monkeypatch, capsys):
    source = template.text("reference")
    (tmp_path / "unscaled.py").write_text(source + "\n\ndef scale(scores, d_k):\n    return np.asarray(scores)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert command.main("unscaled", examples=20, chosen=["scale"], out=str(tmp_path / "out")) == 1
    captured = capsys.readouterr()
    assert "FINDING scale/scaled" in captured.out and "unscaled-scale-float64.yaml" in captured.out, captured.out
    share = next(line for line in captured.out.splitlines() if line.startswith("  scale: "))
    assert re.match(r"  scale: \d+ distinct cases( of 20 drawn| \(20 drawn, the rest narrowing a finding\)), ", share)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "unscaled-scale-float64.py",
        "unscaled-scale-float64.yaml",
    ]


def test_an_op_whose_every_draw_is_excused_is_named_on_the_verdict_line(tmp_path, monkeypatch, capsys):
    """An outside trial's float64 run said `ok ... no finding` with 13 of its 20 ops judging nothing: only the ops'
    own lines showed it."""
    source = template.text("reference")
    declared = '\nKNOWN_DIVERGENCES = {"fuzz_scale/scaled/float64": "every draw excused, for this test"}\n'
    (tmp_path / "blind.py").write_text(source + declared)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert command.main("blind", examples=4, chosen=["softmax", "scale"], out=str(tmp_path / "out")) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert "no finding" in last and last.endswith("; 1 of 2 ops judged no output (see their lines): scale"), last
