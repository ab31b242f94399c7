"""attention-conformance: does each framework compute the same trainable self-attention as a
float64 reference? The engine: load the spec, plan the tests, run them through pytest, verify,
report. Importing it imports no framework; `registry.load(name)` imports one adapter's.

PYTEST_DONT_REWRITE: the console script imports this package before pytest starts, and the
verifiers raise their own messages, so pytest's assertion rewriting has nothing to do here.
"""

__version__ = "0.2.0"


def known_divergences(adapter):
    """A built-in adapter's known divergences, as an adapter declares its own: {'case/output/dtype': reason}.

    For an adapter that wraps or copies a built-in one, so it inherits what that framework is known
    to do differently: `KNOWN_DIVERGENCES = known_divergences("torch") | {"my_case": "why"}`.
    Both sources: spec/divergences/<adapter>.yaml's entries for it and the built-in module's own
    KNOWN_DIVERGENCES (reading those imports that adapter, and so its framework)."""
    import importlib

    from attention_conformance.cases import divergences
    from attention_conformance.contract import ids, registry

    if adapter not in registry.NAMES:
        raise ValueError(f"known_divergences({adapter!r}): not a built-in adapter; one of {', '.join(registry.NAMES)}")
    module = importlib.import_module(registry.module_path(adapter))
    return {ids.declared_key(pattern): reason for pattern, reason in divergences.declared(adapter, module).items()}
