"""Points the suite at adapters, parametrizes it from the spec, and refuses to go silently green.

    pytest --adapter torch            # one framework (repeatable; default: reference)
    pytest --adapter mypkg.my_adapter # any importable module that meets the contract

A requested adapter that does not import, or breaks the contract, stops the run (exit 4).
A complete run (no -k, -m or node ids) that ran fewer conformance tests than the spec defines
for the requested adapters fails. Each adapter's results go to reports/<adapter>.json for
the summary table when --adapter is given; a stale report is deleted before its adapter is
even imported, so a framework that fails to import shows as missing, never as its last result.
"""

import json
import time
from pathlib import Path

import pytest

import adapters
import spec
from spec import golden
from spec.check import evaluate
from spec.summary import mutant_names

ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser):
    group = parser.getgroup("attention-conformance")
    group.addoption("--adapter", action="append", default=[], metavar="NAME",
                    help=f"adapter to run the spec against: one of {', '.join(adapters.NAMES)} or a dotted module path "
                         "(repeatable; default: reference)")
    group.addoption("--golden-dir", default=str(golden.GOLDEN_DIR), metavar="DIR", help="golden tensors to compare against")
    group.addoption("--reports", default=str(spec.REPORTS_DIR), metavar="DIR", help="where reports/<adapter>.json go")
    group.addoption("--device", default="cpu", choices=("cpu", "gpu"),
                    help="where the frameworks compute (default cpu); an unavailable device stops the run")
    group.addoption("--spec", default=str(spec.SPEC_DIR / "attention.yaml"), metavar="FILE", help="the spec to run")
    group.addoption("--known-divergences", default=str(spec.SPEC_DIR / "known_divergences.yaml"), metavar="FILE",
                    help="tests expected to fail, with reasons (run as strict xfail)")


class Check:
    """One conformance test: one output of one case, on one adapter, in one dtype."""

    def __init__(self, adapter_name, dtype, case, quantity):
        self.adapter_name, self.dtype, self.case, self.quantity = adapter_name, dtype, case, quantity
        self.id = f"{adapter_name}-{dtype}-{case.id}"
        self.margin = self.ulp = None

    def __call__(self):
        __tracebackhide__ = True
        self.margin, self.ulp = evaluate(_state.spec, self.adapter_name, _state.loaded[self.adapter_name],
                                         self.case, self.quantity, self.dtype, _state.goldens)


class _State:
    spec = goldens = None
    loaded = {}
    numerics = {}
    devices = {}
    expected = set()
    results = {}
    mutants = {}
    divergences = {}
    conformance_collected = False


_state = _State()


def _report_name(name):
    return name if name in adapters.NAMES else name.replace(".", "_")


def pytest_configure(config):
    names = config.getoption("adapter") or ["reference"]
    _state.reports = Path(config.getoption("reports"))
    if config.getoption("adapter"):  # only a run asked for an adapter reports on it
        _state.reports.mkdir(exist_ok=True)
        for name in names:
            (_state.reports / f"{_report_name(name)}.json").unlink(missing_ok=True)
    try:
        _state.spec = spec.load(config.getoption("spec"))
        _state.goldens = golden.Goldens(config.getoption("golden_dir"))
        for ref in spec.golden_references(_state.spec):  # every golden read and hash-checked before any test
            _state.goldens.tensor(ref)
        _state.divergences = spec.load_divergences(config.getoption("known_divergences"))
    except (spec.SpecError, golden.GoldenError) as exc:
        raise pytest.UsageError(str(exc)) from None
    try:
        _state.loaded = {name: adapters.load(name) for name in names}
    except adapters.AdapterError as exc:
        raise pytest.UsageError(str(exc)) from None
    _state.numerics = adapters._numerics.pin()
    _state.devices = {name: _devices(module) for name, module in _state.loaded.items()}
    device = config.getoption("device")
    for name, seen in _state.devices.items():
        if device not in seen:
            raise pytest.UsageError(f"device {device!r} is unavailable to adapter {name!r}: it sees {', '.join(seen)}")
    if device != "cpu":
        raise pytest.UsageError(f"device {device!r} is available, but placing the spec's arrays on it is not built yet")
    _state.expected = {
        f"test_{q}[{name}-{dtype}-{case.id}]"
        for name, module in _state.loaded.items()
        for dtype in _state.spec.dtypes_for(module)
        for q in spec.QUANTITIES
        for case, exp in _state.spec.items(q)
        if _state.spec.applies(case, exp, dtype, module.DTYPES[0])
    }
    _state.results = {name: {} for name in names}


def _devices(module):
    """What the adapter's framework can compute on; an adapter without devices() is CPU-only."""
    return getattr(module, "devices", lambda: ["cpu"])()


def pytest_report_header(config):
    lines = [f"adapter {name}: {module.version()}, dtypes {', '.join(_state.spec.dtypes_for(module))}, "
             f"devices seen {', '.join(_state.devices[name])} (running on {config.getoption('device')})"
             for name, module in _state.loaded.items()]
    lines.append("numeric switches: " + (", ".join(f"{k}={v}" for k, v in _state.numerics.items()) or "none (no framework imported)"))
    return lines


MUTANTS = mutant_names()


@pytest.fixture
def goldens():
    return _state.goldens


@pytest.fixture
def known_divergences():
    return _state.divergences


@pytest.fixture
def record_mutant():
    """Keep what a wrong adapter did, for the kill-rate table in the summary."""

    def record(name, expected, results):
        failing = sorted(t for t, (outcome, _) in results.items() if outcome in ("failed", "error"))
        _state.mutants[name] = {"expected": expected, "cases": len(results), "caught_by": failing}

    return record


def pytest_generate_tests(metafunc):
    if "requested_adapter" in metafunc.fixturenames:
        metafunc.parametrize("requested_adapter", list(_state.loaded))
    if "deterministic_adapter" in metafunc.fixturenames:
        # Shown on the reference and torch, the cheapest framework: a whole-spec run twice costs
        # JAX and TensorFlow a minute of imports and compiles for the same fact.
        names = [n for n in _state.loaded if n in ("reference", "torch")]
        skip = pytest.mark.skip(reason="determinism is shown in the reference and torch environments")
        metafunc.parametrize("deterministic_adapter", names or [pytest.param(None, marks=skip, id="elsewhere")])
    if "torch_adapter" in metafunc.fixturenames:
        skip = pytest.mark.skip(reason="torch's switch, shown in the torch environment")
        metafunc.parametrize("torch_adapter", ["torch"] if "torch" in _state.loaded else [pytest.param(None, marks=skip, id="elsewhere")])
    if "mutant" in metafunc.fixturenames:  # tests/mutants/<adapter>__<bug>.py, for the adapters under test
        metafunc.parametrize("mutant", [m for m in MUTANTS if m.split("__")[0] in _state.loaded])
    if "check" not in metafunc.fixturenames:
        return
    quantity = metafunc.function.__name__.removeprefix("test_")
    params = []
    for name, module in _state.loaded.items():
        for dtype in _state.spec.dtypes_for(module):
            for case, exp in _state.spec.items(quantity):
                if not _state.spec.applies(case, exp, dtype, module.DTYPES[0]):
                    continue
                check = Check(name, dtype, case, quantity)
                reason = _state.spec.not_applicable(module, case, dtype)
                marks = [pytest.mark.skip(reason=f"not applicable: {reason}")] if reason else []
                params.append(pytest.param(check, marks=marks, id=check.id))
    metafunc.parametrize("check", params)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    # Before -k/-m deselect anything: was the spec-driven module part of this run at all?
    _state.conformance_collected = any(item.path.name == "test_conformance.py" for item in items)
    for item in items:
        reason = spec.divergence_reason(item.name, _state.divergences)
        if reason is not None:
            item.add_marker(pytest.mark.xfail(reason=f"known divergence: {reason}", strict=True))
    # One case's tests together (adapter, dtype, case), so its outputs are computed once and dropped after.
    def case_order(item):
        check = getattr(item, "callspec", None) and item.callspec.params.get("check")
        return (0, check.adapter_name, check.dtype, check.case.id) if check else (1, "", "", "")

    items.sort(key=case_order)


def _is_narrowed(config):
    return bool(config.option.keyword or config.option.markexpr or config.option.deselect or
                any("::" in a for a in config.args) or getattr(config.option, "lf", False) or config.option.maxfail)


def pytest_runtest_logreport(report):
    if report.when != "call" and not (report.when == "setup" and (report.failed or report.skipped)):
        return
    name = report.nodeid.rsplit("::", 1)[-1]
    if name not in _state.expected:
        return
    adapter_name = _adapter_of(name)
    if report.skipped:
        outcome = "diverged" if hasattr(report, "wasxfail") else "not applicable"
    else:
        outcome = report.outcome
    _state.results.setdefault(adapter_name, {})[name] = {
        "outcome": outcome,
        "margin": getattr(report, "margin", None),
        "ulp": getattr(report, "ulp", None),
        "message": str(report.longrepr.reprcrash.message) if report.failed and hasattr(report.longrepr, "reprcrash") else None,
    }


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    check = getattr(item, "callspec", None) and item.callspec.params.get("check")
    if check is not None and call.when == "call":
        report.margin, report.ulp = check.margin, check.ulp
    return report


def pytest_sessionfinish(session, exitstatus):
    if _state.spec is None:
        return
    ran = {name for results in _state.results.values() for name in results}
    missing = sorted(_state.expected - ran)
    complete = _state.conformance_collected and not _is_narrowed(session.config)
    for name, module in _state.loaded.items() if session.config.getoption("adapter") and _state.conformance_collected else ():
        results = _state.results.get(name, {})
        report = {
            "adapter": name,
            "version": module.version(),
            "dtypes": _state.spec.dtypes_for(module),
            "devices": {d: "ran" if d == session.config.getoption("device") else
                        ("unavailable" if d not in _state.devices[name] else "available, not run") for d in ("cpu", "gpu")},
            "numerics": _state.numerics,
            "complete": complete,
            "expected": sum(1 for t in _state.expected if f"[{name}-" in t),
            "tests": results,
            "mutants": {m: r for m, r in _state.mutants.items() if m.split("__")[0] == name},
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        (_state.reports / f"{_report_name(name)}.json").write_text(json.dumps(report, indent=1) + "\n")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if complete and missing:
        reporter.write_line(f"FAILED: ran {len(ran)} of {len(_state.expected)} conformance tests the spec defines; "
                            f"first missing: {', '.join(missing[:5])}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    stale = sorted(p for p in _state.divergences
                   if _adapter_of(p) in _state.loaded and not any(spec.divergence_reason(t, {p: p}) for t in _state.expected))
    if complete and stale:
        reporter.write_line(f"FAILED: known divergences that match no test (renamed or fixed?): {', '.join(stale)}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _adapter_of(test_id):
    return test_id[test_id.index("[") + 1:].split("-")[0]
