"""The disk cache (attention_conformance/cache.py): the folder the user chose, or none; and a file written
whole or not at all, a failed write leaving nothing behind and a disk that refuses costing no result.
"""

import os

import pytest

from attention_conformance import cache


@pytest.fixture
def no_choice(monkeypatch):
    monkeypatch.delenv("ATTENTION_CONFORMANCE_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    return monkeypatch


def test_the_folder_is_the_users_choice_first_then_xdg_then_home(no_choice, tmp_path):
    no_choice.setenv("HOME", str(tmp_path / "home"))
    assert cache.directory() == tmp_path / "home" / ".cache" / "attention-conformance"
    no_choice.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.directory() == tmp_path / "xdg" / "attention-conformance"
    no_choice.setenv("ATTENTION_CONFORMANCE_CACHE", str(tmp_path / "mine"))
    assert cache.directory() == tmp_path / "mine"
    assert cache.entry("onnx", "graph.onnx") == tmp_path / "mine" / "onnx" / "graph.onnx"


def test_off_keeps_nothing_and_an_empty_setting_is_no_choice(no_choice, tmp_path):
    no_choice.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    no_choice.setenv("ATTENTION_CONFORMANCE_CACHE", "")
    assert cache.directory() == tmp_path / "xdg" / "attention-conformance"
    no_choice.setenv("ATTENTION_CONFORMANCE_CACHE", "off")
    assert cache.directory() is None and cache.entry("onnx", "graph.onnx") is None


def _files(folder):
    return sorted(p.name for p in folder.rglob("*") if p.is_file())


def test_a_write_makes_its_folders_and_leaves_the_whole_file_alone(tmp_path):
    path = tmp_path / "kind" / "entry.npz"
    cache.write(path, lambda f: f.write(b"whole"))
    assert path.read_bytes() == b"whole" and _files(tmp_path) == ["entry.npz"]
    cache.write(path, lambda f: f.write(b"replaced"))
    assert path.read_bytes() == b"replaced" and _files(tmp_path) == ["entry.npz"]


def _half_then(exc):
    def save(f):
        f.write(b"half")
        raise exc

    return save


def test_a_full_disk_mid_write_keeps_the_old_file_and_leaves_no_temporary_one(tmp_path):
    path = tmp_path / "kind" / "entry.npz"
    cache.write(path, lambda f: f.write(b"old"))
    cache.write(path, _half_then(OSError(28, "No space left on device")))  # swallowed: the next run recomputes
    assert path.read_bytes() == b"old" and _files(tmp_path) == ["entry.npz"]


@pytest.mark.parametrize("exc", [ValueError("a bug in save"), KeyboardInterrupt()])
def test_any_other_failure_in_save_is_raised_and_leaves_no_temporary_file(tmp_path, exc):
    path = tmp_path / "kind" / "entry.npz"
    with pytest.raises(type(exc)):
        cache.write(path, _half_then(exc))
    assert _files(tmp_path) == []


def test_a_folder_that_cannot_be_made_costs_nothing(tmp_path):
    (tmp_path / "kind").write_text("a file where the folder should be")
    cache.write(tmp_path / "kind" / "entry.npz", lambda f: f.write(b"x"))
    assert _files(tmp_path) == ["kind"]


def test_a_read_only_folder_costs_nothing(tmp_path):
    folder = tmp_path / "read_only"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("this user writes through read-only permissions (root)")
        cache.write(folder / "entry.npz", lambda f: f.write(b"x"))
        assert _files(folder) == []
    finally:
        folder.chmod(0o700)
