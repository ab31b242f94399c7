"""Reading untrusted files (attention_conformance/safe_io.py): only a regular file, never past its limit;
YAML measured before it is built, with duplicate keys, keys that are not values, too many values and too
deep a tree each refused with one clear error that says where. (tests/cases/test_hostile.py sends the real
bombs through the loader; here the limits are lowered so that each refusal is shown on a few bytes.)"""

import pytest
import yaml

from attention_conformance import safe_io
from attention_conformance.safe_io import UnsafeInput, load_yaml, read_bounded


def test_a_file_at_its_limit_is_read_whole(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_bytes(b"x" * 100)
    assert read_bounded(path, 100, "a spec") == b"x" * 100
    with pytest.raises(UnsafeInput, match=r"spec.yaml: over the 99-byte limit for a spec$"):
        read_bounded(path, 99, "a spec")


def test_a_folder_or_a_missing_file_is_refused_naming_it(tmp_path):
    with pytest.raises(UnsafeInput, match=f"^{tmp_path}: not a regular file$"):
        read_bounded(tmp_path, 100, "a spec")
    with pytest.raises(UnsafeInput, match=r"missing.yaml: cannot read: No such file"):
        read_bounded(tmp_path / "missing.yaml", 100, "a spec")


def test_yaml_loads_as_plain_data_with_merges_overridden():
    text = "base: &b {rtol: 1.0e-3, atol: 0}\nclose:\n  <<: *b\n  atol: 1.0e-6\n"
    assert load_yaml(text) == {"base": {"rtol": 1e-3, "atol": 0}, "close": {"rtol": 1e-3, "atol": 1e-6}}
    assert load_yaml("") is None


@pytest.mark.parametrize(
    "text,says",
    [
        ("a: 1\nb: 2\na: 3\n", "line 3: duplicate key 'a'"),
        ("? [1, 2]\n: x\n", "line 1: a mapping key must be a plain value"),
        ("date: 2026-02-31\n", "a value cannot be read: day is out of range"),
        ("a: &x [1, *x]\n", "line 1: an alias refers to a node that contains it"),
    ],
)
def test_data_a_loader_would_take_wrongly_is_refused_in_one_line(text, says):
    with pytest.raises(UnsafeInput) as info:
        load_yaml(text)
    assert says in str(info.value) and "\n" not in str(info.value)


def test_an_object_tag_is_refused_by_the_safe_loader():
    with pytest.raises(yaml.YAMLError):
        load_yaml("!!python/object/apply:os.system ['true']\n")


def test_too_many_values_once_aliases_are_expanded_is_refused(monkeypatch):
    monkeypatch.setattr(safe_io, "MAX_NODES", 12)
    # Keys, lists and the document count: 11 values here once b is expanded, 16 with b's list twice.
    assert load_yaml("a: &x [1, 2, 3]\nb: *x\n") == {"a": [1, 2, 3], "b": [1, 2, 3]}
    with pytest.raises(UnsafeInput, match="line 1: more than 12 values once aliases are expanded"):
        load_yaml("a: &x [1, 2, 3]\nb: [*x, *x]\n")


def test_too_deep_a_tree_is_refused_written_out_or_through_aliases(monkeypatch):
    monkeypatch.setattr(safe_io, "MAX_DEPTH", 4)
    assert load_yaml("a: [[1]]\n") == {"a": [[1]]}
    assert load_yaml("a: [[[1]]]\n") == {"a": [[[1]]]}  # exactly 4 containers: both checks count the same way
    with pytest.raises(UnsafeInput, match="line 1: nested more than 4 deep$"):
        load_yaml("a: [[[[1]]]]\n")
    # Written out, no line is deeper than three; expanded, b holds a's two levels under its own two.
    with pytest.raises(UnsafeInput, match="nested more than 4 deep once aliases are expanded"):
        load_yaml("a: &x [[1]]\nb: [[*x]]\n")


def test_one_line_escapes_what_would_break_a_line_or_a_terminal():
    assert safe_io.one_line("key\nnext\x1b[31m\u0085 ok") == "key\\nnext\\x1b[31m\\x85 ok"
    assert safe_io.one_line("plain text: 1.5") == "plain text: 1.5"
