"""A file is written whole or not at all, by each writer under a name of its own, with the permissions open()
gives; a refusal is one line that names the path, what the system said and what to do."""

import errno
import os

import pytest

from attention_conformance import writing


def test_a_file_is_written_whole_with_nothing_left_beside_it(tmp_path):
    target = tmp_path / "deeper" / "page.html"
    writing.whole(target, b"<html>")
    writing.whole(target, b"<html>2")
    assert target.read_bytes() == b"<html>2" and os.listdir(target.parent) == ["page.html"]
    umask = os.umask(0o022)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # as open() makes it, not mkstemp's 0600


@pytest.mark.parametrize(
    ("code", "said", "to_do"),
    [
        (errno.EROFS, "Read-only file system", "choose a folder on a writable file system"),
        (errno.ENOSPC, "No space left on device", "free space on that disk or choose a folder on another"),
        (errno.EACCES, "Permission denied", "choose a folder you may write to"),
        (errno.EIO, "Input/output error", "check that folder"),
    ],
)
def test_a_refusal_is_one_line_and_the_last_file_stays(tmp_path, monkeypatch, code, said, to_do):
    target = tmp_path / "matrix.md"
    target.write_bytes(b"last complete")
    real_replace = os.replace

    def refuse(*args):
        raise OSError(code, said)

    monkeypatch.setattr(writing.os, "replace", refuse)  # the bytes went out; the rename is refused
    with pytest.raises(writing.Refused) as refused:
        writing.whole(target, b"new", option="--out")
    monkeypatch.setattr(writing.os, "replace", real_replace)
    assert str(refused.value) == f"{target}: cannot write ({said}): {to_do} (--out)"
    assert "\n" not in str(refused.value)
    assert target.read_bytes() == b"last complete" and os.listdir(tmp_path) == ["matrix.md"]


@pytest.mark.parametrize("under", ["taken", "taken/deeper"])
def test_a_file_where_a_folder_of_the_path_should_be_is_named_as_such(tmp_path, under):
    """An outside trial read "(File exists)" for --json taken/v.json, taken a file: mkdir's words, not the cause."""
    (tmp_path / "taken").write_text("a file")
    target = tmp_path / under / "v.json"
    with pytest.raises(writing.Refused) as refused:
        writing.whole(target, b"{}", option="--json")
    assert str(refused.value) == (
        f"{target}: cannot write (Not a directory): a file stands where a folder of that path should be: choose "
        "another path (--json)"
    )
