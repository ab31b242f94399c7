"""Where the data folders are: inside the package in a wheel, beside it in a checkout.

A leaf: every stage reads its paths here, so none imports the package's __init__ for them.
"""

from pathlib import Path

HERE = Path(__file__).resolve().parent


def _data(name):
    inside = HERE / name
    return inside if inside.is_dir() else HERE.parent / name


SPEC_DIR = _data("spec")  # attention.yaml, divergences/, documents/
GOLDEN_DIR = _data("golden")
ADAPTERS_DIR = _data("adapters")
PUBLISHED_DIR = SPEC_DIR / "published"  # the published run's reports, gzipped: `summary --with-published`
DOCUMENTS_DIR = SPEC_DIR / "documents"  # copies of the two documents, so quotes are checked on any install
CONFORMANCE_TESTS = HERE / "conformance.py"  # the module pytest collects: one test function per output
DOCS_DIR = _data("docs")  # the manual (docs/*.md): `attention-conformance docs NAME` prints a page where pip put it
