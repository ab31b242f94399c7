"""The suite's own tests, beside the plugin (attention_conformance/plugin.py, loaded by its entry point).

Fixtures for checking the checker in each framework's environment: the adapters this run asked
for, the wrong adapters in tests/mutants/ for them, and the kill-rate record the summary reads
from <reports>/mutants-<adapter>.json.
"""

from pathlib import Path

import pytest
from golden_files import copy_goldens

from attention_conformance import plugin
from attention_conformance.run import reports

MUTANTS = sorted(p.stem for p in (Path(__file__).parent / "mutants").glob("*__*.py"))  # <adapter>__<bug>.py
_ran = {}


def _base(mutant):
    return mutant.split("__")[0]


@pytest.fixture
def goldens():
    return plugin.state.goldens


@pytest.fixture
def golden_copy(tmp_path):
    return copy_goldens(tmp_path / "golden")


@pytest.fixture
def known_divergences():
    return plugin.state.divergences


@pytest.fixture
def record_mutant():
    """Keep what a wrong adapter did, for the kill-rate table in the summary."""

    def record(name, expected, results, families=()):
        failing = sorted(t for t, (outcome, _) in results.items() if outcome in ("failed", "error"))
        _ran[name] = {"expected": expected, "cases": len(results), "caught_by": failing, "families": sorted(families)}

    return record


def pytest_configure(config):
    for name in config.getoption("adapter"):  # a self-check run that dies leaves no kill rate behind
        reports.forget_mutants(config.getoption("reports"), name)


def _elsewhere(reason):
    return [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="elsewhere")]


def pytest_generate_tests(metafunc):
    loaded = list(plugin.state.loaded)
    if "requested_adapter" in metafunc.fixturenames:
        metafunc.parametrize("requested_adapter", loaded or _elsewhere("needs --adapter"))
    if "deterministic_adapter" in metafunc.fixturenames:
        # Shown on the reference and torch, the cheapest framework: a whole-spec run twice costs
        # JAX and TensorFlow a minute of imports and compiles for the same fact.
        names = [n for n in loaded if n in ("reference", "torch")]
        metafunc.parametrize(
            "deterministic_adapter", names or _elsewhere("determinism is shown in the reference and torch environments")
        )
    if "torch_adapter" in metafunc.fixturenames:
        metafunc.parametrize(
            "torch_adapter",
            ["torch"] if "torch" in loaded else _elsewhere("torch's switch, shown in the torch environment"),
        )
    if "jax_adapter" in metafunc.fixturenames:
        metafunc.parametrize(
            "jax_adapter",
            ["jax"] if "jax" in loaded else _elsewhere("jax's compile cache, shown in the jax environment"),
        )
    if "mutant" in metafunc.fixturenames:
        metafunc.parametrize("mutant", [m for m in MUTANTS if _base(m) in loaded])


def pytest_runtest_logreport(report):
    """What a wrong adapter cost the self-check, by the families it ran (publish/costs.py): pytest's own duration of
    its test's call, so no test reads a clock."""
    if report.when == "call" and "test_wrong_adapter_is_caught[" in report.nodeid:
        name = report.nodeid.rsplit("[", 1)[1].rstrip("]")
        if name in _ran:
            _ran[name]["seconds"] = round(report.duration, 3)


def pytest_sessionfinish(session):
    """Every wrong adapter defined for a requested adapter is listed, run or not: one not run shows as NOT RUN."""
    if not plugin.state.active:
        return
    for name in plugin.state.loaded:
        defined = [m for m in MUTANTS if _base(m) == name]
        if defined:
            reports.write_mutants(
                plugin.state.reports, name, defined, {m: r for m, r in _ran.items() if _base(m) == name}
            )
