"""golden/regenerate.py: --check names drift, refuses bad data, never half-writes. That it writes the
committed bytes on every machine is tests/test_deterministic.py's."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attention_conformance.cases import golden

ROOT = Path(__file__).resolve().parent.parent.parent
SCRIPT = ROOT / "golden" / "regenerate.py"


@pytest.fixture(scope="module")
def regenerate():
    spec = importlib.util.spec_from_file_location("regenerate", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _files(directory):
    return {p.name: p.read_bytes() for p in sorted(Path(directory).glob("*.json"))}


def test_check_passes_on_the_committed_goldens():
    run = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_check_names_each_drifted_tensor_and_element(tmp_path):
    directory = tmp_path / "golden"
    shutil.copytree(golden.GOLDEN_DIR, directory, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    path = directory / "doc004_binary.json"
    doc = json.loads(path.read_text())
    doc["tensors"]["weights"]["data"][3][1] += 1e-4
    path.write_text(golden.render(doc["description"], golden.parse(json.dumps(doc), "x")))
    manifest = json.loads((directory / golden.MANIFEST).read_text())
    manifest["files"]["doc004_binary.json"]["sha256"] = golden.sha256(path.read_bytes())
    (directory / golden.MANIFEST).write_text(json.dumps(manifest))
    before = _files(directory)
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--dir", str(directory)], capture_output=True, text=True
    )
    assert run.returncode == 1
    assert "DRIFT doc004_binary.json#weights[3, 1]" in run.stdout
    assert run.stdout.count("DRIFT") == 1
    assert _files(directory) == before  # --check writes nothing


def test_refuses_to_write_values_that_no_longer_match_the_documents(tmp_path, regenerate, monkeypatch, capsys):
    shutil.copytree(golden.GOLDEN_DIR, tmp_path / "g", ignore=shutil.ignore_patterns("*.py"))
    before = _files(tmp_path / "g")
    real_build = regenerate.build

    def drifted_build():
        files = real_build()
        desc, tensors = files["doc000_seed123.json"]
        tensors["w_query"] = tensors["w_query"] + np.float32(1e-3)  # as if the RNG had changed
        return files

    monkeypatch.setattr(regenerate, "build", drifted_build)
    assert regenerate.main(["--dir", str(tmp_path / "g")]) == 1
    assert "REFUSED" in capsys.readouterr().out
    assert _files(tmp_path / "g") == before


def test_interrupted_write_leaves_previous_goldens_intact(tmp_path, regenerate, monkeypatch):
    directory = tmp_path / "g"
    shutil.copytree(golden.GOLDEN_DIR, directory, ignore=shutil.ignore_patterns("*.py"))
    for p in directory.glob("*.json"):  # make every new file differ from what is on disk
        p.write_bytes(p.read_bytes().replace(b'"description": "', b'"description": "old '))
    before = _files(directory)
    calls = []

    def interrupted_fsync(fd):
        calls.append(fd)
        if len(calls) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted_fsync)
    with pytest.raises(KeyboardInterrupt):
        regenerate.main(["--dir", str(directory)])
    assert _files(directory) == before
    assert list(directory.glob(".*.tmp")) == []
