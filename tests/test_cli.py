"""The command's dispatch (attention_conformance/cli.py), in this process: each command reaches the module of its
stage, wrong usage exits 2 with one line, and the commands without a run of their own (validate, template,
examples, sweep's refusals) give their answer. tests/test_out_of_tree.py runs the commands as an outsider does."""

import numpy as np
import pytest

from attention_conformance import cli
from attention_conformance.tools import sweep_cases, template


def test_validate_reads_the_spec_and_its_goldens(capsys):
    assert cli.main(["validate"]) == 0
    assert capsys.readouterr().out.startswith("ok: ")


def test_validate_names_a_broken_spec_in_one_line(tmp_path, capsys):
    (tmp_path / "spec.yaml").write_text("cases: [\n")
    assert cli.main(["validate", str(tmp_path / "spec.yaml")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(tmp_path / "spec.yaml") in err and err.count("\n") == 1


def test_template_prints_the_template_or_a_built_in_adapter(capsys):
    assert cli.main(["template"]) == 0
    assert capsys.readouterr().out == template.text()
    assert cli.main(["template", "reference"]) == 0
    assert capsys.readouterr().out == template.text("reference")


def test_docs_lists_the_manual_prints_a_page_and_names_the_pages_for_a_wrong_one(capsys):
    """A user who installed from pip has no checkout: the contract, at least, is one command away (issue 60)."""
    assert cli.main(["docs"]) == 0
    listed = capsys.readouterr().out
    assert "contract " in listed and "usage " in listed
    assert cli.main(["docs", "contract"]) == 0
    assert capsys.readouterr().out.startswith("# The adapter contract")
    assert cli.main(["docs", "contrac"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the pages are " in err and "contract" in err


def test_examples_writes_the_explain_files(tmp_path, capsys):
    assert cli.main(["examples", str(tmp_path / "files")]) == 0
    written = sorted(p.name for p in (tmp_path / "files").glob("*.npz"))
    assert written and all(set(np.load(tmp_path / "files" / name).files) >= {"out"} for name in written)


def test_sweep_refuses_an_op_it_does_not_cover_before_loading_an_adapter(capsys):
    with pytest.raises(SystemExit) as refused:
        cli.main(["sweep", "--adapter", "no_such_adapter", "--op", "draw"])
    assert refused.value.code == 2
    assert f"--op takes {', '.join(sweep_cases.SWEEP_OPS)}" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["no_such_command"],
        ["check"],
        ["validate", "a", "b"],
        ["summary", "--html", " "],
        ["fuzz", "--adapter", "x", "y"],
        ["sensitivity", "--seed", "-1"],
    ],
    ids=[
        "unknown command",
        "check without a module",
        "validate twice",
        "summary with an empty page path",
        "extra",
        "sensitivity with a negative seed",
    ],
)
def test_wrong_usage_exits_2(argv, capsys):
    with pytest.raises(SystemExit) as refused:
        cli.main(argv)
    assert refused.value.code == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--adapter", "no_such_adapter_module"], "does not import"),
        (["--adapter", "reference", "--model", "/no/such/model.yaml"], "/no/such/model.yaml"),
        (["--adapter", "reference", "--examples", "0"], "--examples must be at least 1"),
    ],
    ids=["an adapter that does not import", "a model file that is not there", "no examples"],
)
def test_sweep_refuses_in_one_line_with_exit_2(argv, said, capsys):
    assert cli.main(["sweep", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and said in err and err.count("\n") == 1, err


def test_check_calls_every_function_in_every_mode_and_names_the_mode_that_breaks(tmp_path, monkeypatch, capsys):
    from attention_conformance.tools import template

    source = template.text("reference") + (
        "\n\nMODES = {'eager': 'as written', 'compiled': 'a compiler'}\n\n\n"
        "def in_mode(mode, op):\n"
        "    return op if mode == 'eager' or op.__name__ != 'softmax' else (lambda scores: np.zeros(3))\n"
    )
    (tmp_path / "check_two_modes.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cli.main(["check", "check_two_modes-compiled"]) == 1  # a column's name checks its adapter
    *err, last = capsys.readouterr().err.strip().splitlines()
    assert err and all(line.startswith("check_two_modes: in mode compiled: softmax(scores)") for line in err), err
    assert last == f"check_two_modes: {len(err)} problem(s), the first lines above"
