"""attention-conformance: does each framework compute the same trainable self-attention as a
float64 reference? The engine: load the spec, plan the tests, run them through pytest, verify,
report. Importing it imports no framework; `contract.load(name)` imports one adapter's.

PYTEST_DONT_REWRITE: the console script imports this package before pytest starts, and the
verifiers raise their own messages, so pytest's assertion rewriting has nothing to do here.
"""

from pathlib import Path

__version__ = "0.2.0"

HERE = Path(__file__).resolve().parent


def _data(name):
    """Where a data folder lives: inside the package in a wheel, beside it in a checkout."""
    inside = HERE / name
    return inside if inside.is_dir() else HERE.parent / name


SPEC_DIR = _data("spec")  # attention.yaml, known_divergences.yaml, documents/
GOLDEN_DIR = _data("golden")
ADAPTERS_DIR = _data("adapters")
DOCS_DIR = SPEC_DIR / "documents"  # copies of the two documents, so quotes are checked on any install
CONFORMANCE_TESTS = HERE / "conformance.py"  # the module pytest collects: one test function per output


def known_divergences(adapter):
    """A built-in adapter's known divergences, as an adapter declares its own: {'case/output/dtype': reason}.

    For an adapter that wraps or copies a built-in one, so it inherits what that framework is known
    to do differently: `KNOWN_DIVERGENCES = known_divergences("torch") | {"my_case": "why"}`.
    Both sources: spec/known_divergences.yaml's entries for it and the built-in module's own
    KNOWN_DIVERGENCES (reading those imports that adapter, and so its framework)."""
    import importlib

    from attention_conformance import contract, divergences, plan

    if adapter not in contract.NAMES:
        raise ValueError(f"known_divergences({adapter!r}): not a built-in adapter; one of {', '.join(contract.NAMES)}")
    module = importlib.import_module(contract.module_path(adapter))
    return {plan.declared_key(pattern): reason for pattern, reason in divergences.declared(adapter, module).items()}
