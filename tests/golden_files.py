"""Scratch copies of the golden files for the suite's own tests, and re-signing one in its manifest."""

import json
import shutil

from attention_conformance.cases import golden


def copy_goldens(target):
    """The repository's golden files (not regenerate.py) in a scratch folder."""
    shutil.copytree(golden.GOLDEN_DIR, target, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return target


def resign(directory, file_name):
    """Record a golden file's current sha256 in the folder's manifest, as a careless regeneration would."""
    manifest = json.loads((directory / golden.MANIFEST).read_text())
    manifest["files"][file_name]["sha256"] = golden.sha256((directory / file_name).read_bytes())
    (directory / golden.MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
