"""The columns an environment's adapter runs (attention_conformance/tools/columns.py), read from outside it."""

import sys

from attention_conformance.tools import columns


def test_an_adapter_of_one_mode_has_no_other_column_and_one_that_cannot_load_none():
    assert columns.other_modes(sys.executable, "reference") == []
    assert columns.other_modes(sys.executable, "no_such_adapter") == []


def test_an_adapter_of_columns_two_modes_has_the_column_of_its_second(tmp_path, monkeypatch):
    (tmp_path / "columns_two_modes.py").write_text(
        "from attention_conformance.adapters.reference import *\n"
        "MODES = {'eager': 'op by op', 'compiled': 'a compiler'}\n"
        "def in_mode(mode, op):\n    return op\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert columns.other_modes(sys.executable, "columns_two_modes") == ["columns_two_modes-compiled"]
