"""attention-conformance: does each framework compute the same trainable self-attention as a
float64 reference? The engine: load the spec, plan the tests, run them through pytest, verify,
report. Importing it imports no framework; `registry.load(name)` imports one adapter's.

PYTEST_DONT_REWRITE: the console script imports this package before pytest starts, and the
verifiers raise their own messages, so pytest's assertion rewriting has nothing to do here.
"""

__version__ = "0.2.0"


def __getattr__(name):
    """`from attention_conformance import known_divergences` (PEP 562): the public helper, imported when asked for, so
    importing the package still imports nothing else (its definition: cases/divergences.py)."""
    if name == "known_divergences":
        from attention_conformance.cases.divergences import known_divergences

        return known_divergences
    raise AttributeError(f"module 'attention_conformance' has no attribute {name!r}")
