"""The modes (attention_conformance/modes.py): a column's name carries its mode unless it is the adapter's first,
so an adapter that declares no modes keeps the ids it always had, and every name splits back."""

import types

import pytest

from attention_conformance import modes


def test_an_adapter_without_modes_runs_eager_only():
    assert modes.declared(types.SimpleNamespace()) == modes.DEFAULT
    assert list(modes.DEFAULT) == ["eager"]


@pytest.mark.parametrize(
    "adapter, mode, first, name",
    [
        ("torch", "eager", "eager", "torch"),
        ("torch", "compiled", "eager", "torch-compiled"),
        ("jax", "eager", "compiled", "jax-eager"),
        ("my-pkg.adapter", "compiled", "eager", "my-pkg.adapter-compiled"),  # an entry point's name may hold "-"
    ],
)
def test_a_column_is_named_by_its_mode_unless_first_and_splits_back(adapter, mode, first, name):
    assert modes.column(adapter, mode, first) == name
    assert modes.split(name) == (adapter, None if mode == first else mode)


def test_a_name_whose_last_word_is_no_mode_is_an_adapter_name():
    assert modes.split("my-adapter") == ("my-adapter", None)
    assert modes.split("compiled") == ("compiled", None)
