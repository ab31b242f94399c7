"""The pytest plugin: points pytest at adapters, generates the spec's tests, refuses silent green.

    pytest --adapter torch ...            # registered for every pytest run where the package is installed
    attention-conformance run --adapter mypkg.my_adapter

Inert unless --adapter is given. A requested adapter that does not import, or breaks the contract, stops the run
(exit 4). A complete run (no -k, -m or node ids) that ran fewer conformance tests than the spec defines for the
requested adapters fails. Each adapter's results go to <reports>/<adapter>.json: from the adapter's import on a start
marker (run/reports.py: hold), so a run that dies shows as unfinished; a folder that refuses the report stops the run
with one line (exit 74). A failing run ends with its root cause (run/root_cause.py). PYTEST_DONT_REWRITE: a run
started inside another pytest session (the suite's own tests) finds this module imported already; it raises its own
messages, so assertion rewriting has nothing to do here either."""

import hashlib
from pathlib import Path

import pytest

from attention_conformance import cache, machine, modes, writing
from attention_conformance.cases import divergences, golden, loader, plan
from attention_conformance.contract import ids, registry
from attention_conformance.margin import Nonconformance
from attention_conformance.paths import CONFORMANCE_TESTS, SPEC_DIR
from attention_conformance.run import calls, declarations, launch, progress, reports, root_cause, verify


def pytest_addoption(parser):
    group = parser.getgroup("attention-conformance")
    group.addoption(
        "--adapter",
        action="append",
        default=[],
        metavar="NAME",
        help=f"adapter to run the spec against: one of {', '.join(registry.NAMES)}, an entry point name or a "
        "dotted module path (repeatable); without it this plugin does nothing",
    )
    group.addoption(
        "--mode",
        action="append",
        default=[],
        choices=modes.MODES,
        help="run each adapter as this mode runs it (repeatable; default: the adapter's first mode, its MODES); "
        "each (adapter, mode) is a column of its own, named <adapter>-<mode> unless it is the adapter's first",
    )
    group.addoption(
        "--golden-dir", default=str(golden.GOLDEN_DIR), metavar="DIR", help="golden tensors to compare against"
    )
    group.addoption(
        "--reports", default=str(reports.DEFAULT_DIR), metavar="DIR", help="where <adapter>.json reports go"
    )
    group.addoption(
        "--device",
        default="cpu",
        choices=("cpu", "gpu"),
        help="where the frameworks compute (default cpu); an unavailable device stops the run",
    )
    group.addoption("--spec", default=str(SPEC_DIR / "attention.yaml"), metavar="FILE", help="the spec to run")
    group.addoption(
        "--known-divergences",
        default=str(divergences.FOLDER),
        metavar="PATH",
        help="tests expected to fail, with reasons (run as strict xfail): a folder of <adapter>.yaml "
        "(default: the built-in adapters', spec/divergences/) or one file",
    )


class ConformanceTest:
    """One conformance test, called by the generated test function."""

    def __init__(self, test):
        self.test = test
        self.margin = self.ulp = self.worst = self.declared = None

    def __call__(self):
        __tracebackhide__ = True
        t = self.test
        try:
            declared = state.divergence_of.get(t.id)
            self.margin, self.ulp, self.worst, self.declared = verify.judged(
                state.spec, t.adapter, state.loaded[t.adapter], t.case, t.output, t.dtype, state.goldens, declared
            )
        except Nonconformance as exc:
            self.worst = {**(exc.worst or {}), "op": t.case.op, "convention": t.case.convention}  # for root_cause
            if isinstance(exc, calls.AdapterRaised) and state.divergence_of.get(t.id) is None:
                raise  # the adapter's own traceback, then the line that names the case
            # Otherwise the message says it all: a declared divergence's report shows its reason and this line, not a
            # traceback through the framework's frames (0.46 s for one of Keras's); the suite's own frames add nothing
            # (pytest formatting their source cost 20 ms a frame, 0.9 s over JAX's expected failures).
            raise type(exc)(str(exc)) from None


class State:
    """What this session runs: read by the suite's own tests through `state`."""

    def __init__(self):
        self.active = False
        self.spec = self.goldens = self.spec_sha256 = None
        self.reports = reports.DEFAULT_DIR
        self.loaded, self.numerics, self.versions, self.devices, self.divergences = {}, {}, {}, {}, {}
        self.divergence_of = {}  # test name -> its known divergence's reason (or None), found once at collection
        self.planned = []  # plan.Test, every test the spec defines for the requested adapters
        self.expected, self.results, self.conformance_collected = set(), {}, False
        self.writes = False  # whether this run replaces the adapters' reports
        self.held = []  # adapters whose last report is put aside until this run's is written (reports.hold)


state = State()
_ROOT_CAUSES = pytest.StashKey[list]()  # the lines pytest_unconfigure ends a failing run with


def pytest_configure(config):
    names = [f"{n}-{m}" for n in config.getoption("adapter") for m in config.getoption("mode")] or config.getoption(
        "adapter"
    )
    if not names:
        return
    state.active = True
    state.reports = config.getoption("reports")
    # A run of the suite's own tests, or one that only collects, leaves the last conformance report alone.
    state.writes = launch.runs_conformance(config) and not config.option.collectonly
    try:
        state.spec = loader.load(config.getoption("spec"))
        state.spec_sha256 = hashlib.sha256(Path(config.getoption("spec")).read_bytes()).hexdigest()
        state.goldens = golden.Goldens(config.getoption("golden_dir"))
        for ref in loader.golden_references(state.spec):  # every golden read and hash-checked before any test
            state.goldens.tensor(ref)
        divergences.read(config.getoption("known_divergences"))  # every entry checked before an adapter loads
    except (loader.SpecError, golden.GoldenError) as exc:
        raise pytest.UsageError(str(exc)) from None
    # From here each adapter's last report is put aside for a start marker (reports.hold); a usage error puts
    # it back, except for an adapter that cannot run as it is now: that one keeps none.
    try:
        state.held = reports.hold(state.reports, names) if state.writes else []
        _load(config, names)
    except writing.Refused as exc:
        reports.restore(state.reports, state.held)
        pytest.exit(str(exc), returncode=writing.EXIT)
    except _Refused as exc:
        reports.restore(state.reports, [n for n in state.held if n != exc.name])
        reports.release(state.reports, [exc.name])
        reports.forget(state.reports, exc.name)
        raise pytest.UsageError(str(exc)) from None
    except (pytest.UsageError, loader.SpecError) as exc:  # a KNOWN_DIVERGENCES entry's field: one line, reports kept
        reports.restore(state.reports, state.held)
        raise pytest.UsageError(str(exc)) from None


class _Refused(Exception):
    """An adapter that cannot run as it is now: its message, and its name (its report is deleted)."""

    def __init__(self, name, message):
        super().__init__(message)
        self.name = name


def _load(config, names):
    for asked in names:
        try:
            module = registry.load(asked)
        except registry.AdapterError as exc:
            raise _Refused(asked, str(exc)) from None
        name = modes.column(module.ADAPTER, module.MODE, next(iter(modes.declared(module))))
        if name != asked and state.writes:  # "--mode" named the adapter's first mode: its column is the bare name
            reports.restore(state.reports, [asked])
            state.held = [n for n in state.held if n != asked] + reports.hold(state.reports, [name])
        state.loaded[name] = module
        unmatched = plan.unmatched_not_applicable(state.spec, state.loaded[name])
        if unmatched:
            raise _Refused(
                name,
                f"adapter {name!r}: NOT_APPLICABLE key(s) {', '.join(map(repr, unmatched))} name no dtype, "
                "op, case, output or input value of this spec (renamed, or a typo?)",
            )
    state.numerics = {k: v for module in state.loaded.values() for k, v in registry.pin(module).items()}
    for name, module in state.loaded.items():  # its own divergences held to the same strict rules as the file's
        state.divergences |= divergences.declared(name, module, config.getoption("known_divergences"))
        try:
            state.versions[name] = registry.ask(name, module, "version", str)
            state.devices[name] = registry.ask(name, module, "devices", (list, tuple), ["cpu"])
        except registry.AdapterError as exc:
            raise _Refused(name, str(exc)) from None
    device = config.getoption("device")
    for name, seen in state.devices.items():
        if device not in seen:
            raise pytest.UsageError(f"device {device!r} is unavailable to adapter {name!r}: it sees {', '.join(seen)}")
    if device != "cpu":
        raise pytest.UsageError(f"device {device!r} is available, but placing the spec's arrays on it is not built yet")
    state.planned = plan.tests(state.spec, state.loaded)
    state.expected = {t.id for t in state.planned}
    state.results = {name: {} for name in state.loaded}


def pytest_report_header(config):
    if not state.active:
        return None
    lines = [
        f"adapter {name}: {state.versions[name]}, mode {module.MODE} ({modes.declared(module)[module.MODE]}), "
        f"dtypes {', '.join(plan.declared_dtypes(state.spec, module))}, "
        f"devices seen {', '.join(state.devices[name])} (running on {config.getoption('device')})"
        for name, module in state.loaded.items()
    ]
    switches = ", ".join(f"{k}={v}" for k, v in state.numerics.items())
    lines.append(f"numeric switches: {switches or 'none (the adapter defines no pin_numerics)'}")
    lines += [f"{name} brought in: {registry.brought_in(name)}" for name in state.loaded]
    lines.append(f"machine: {machine.one_line()}")
    return lines


def pytest_generate_tests(metafunc):
    output = getattr(metafunc.function, "conformance_output", None)
    if output is None:
        return
    if not state.active:
        raise pytest.UsageError(
            "the conformance tests need an adapter: pytest --adapter NAME (or attention-conformance run --adapter NAME)"
        )
    params = [
        pytest.param(
            ConformanceTest(t),
            id=t.param_id,
            marks=[pytest.mark.skip(reason=f"not applicable: {t.not_applicable}")] if t.not_applicable else [],
        )
        for t in state.planned
        if t.output == output
    ]
    metafunc.parametrize("conformance_test", params)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path, parent):
    """The spec's tests keep one node id whether the package is a checkout or in site-packages (where
    pytest would write '::test_context[...]', an empty file part, outside the rootdir): readable,
    the same in junit, and accepted back by `attention-conformance run` (run/launch.py) and by pytest in a checkout."""
    if module_path == CONFORMANCE_TESTS:
        return pytest.Module.from_parent(parent, path=module_path, nodeid=ids.NODE_PATH)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    if not state.active:
        return
    # Before -k/-m deselect anything: was the spec-driven module part of this run at all?
    state.conformance_collected = any(item.path == CONFORMANCE_TESTS for item in items)
    for item in items:
        try:
            reason = declarations.one_for(item.name, state.divergences) if _conformance_test(item) else None
        except declarations.Contradiction as exc:
            raise pytest.UsageError(str(exc)) from None
        state.divergence_of[item.name] = reason
        if reason is not None and reason.unbounded:  # a precision or a raise is checked, not expected to fail
            kind = f" ({reason.kind})" if reason.stated else ""
            item.add_marker(pytest.mark.xfail(reason=f"known divergence{kind}: {reason}", strict=True))
        test = _conformance_test(item)
        if test is not None:  # `-k` selects a family ("soft_capping") or an op, as a case
            item.extra_keyword_matches.update({ids.family_keyword(test.test.case.family), test.test.case.op})

    # One case's tests together (adapter, dtype, case), so its outputs are computed once and dropped after.
    def case_order(item):
        test = _conformance_test(item)
        if test is None:  # another test, or NOTSET: an output no case of this spec checks
            return (1, "", "", "")
        return (0, test.test.adapter, test.test.dtype, test.test.case.id)

    items.sort(key=case_order)


def _conformance_test(item):
    test = getattr(item, "callspec", None) and item.callspec.params.get("conformance_test")
    return test if isinstance(test, ConformanceTest) else None


def pytest_collection_finish(session):
    if state.active:  # the oracle's progress line, over what -k and ids left selected (run/progress.py)
        tests = [t.test for t in map(_conformance_test, session.items) if t is not None]
        progress.start(tests, verify.asks_oracle, session.config.pluginmanager.get_plugin("terminalreporter"))


def pytest_runtest_logfinish():
    progress.flush()  # between tests, where pytest's capture is suspended: the line reaches the user's stderr


def pytest_runtest_logreport(report):
    if not state.active or (
        report.when != "call" and not (report.when == "setup" and (report.failed or report.skipped))
    ):
        return
    name = report.nodeid.rsplit("::", 1)[-1]
    if name not in state.expected:
        return
    message, reason = getattr(report, "failure", None), getattr(report, "reason", None)
    if getattr(report, "stale_divergence", False):
        outcome, message = "stale divergence", str(report.longrepr)
    elif getattr(report, "stale_raise", False):
        outcome = "stale divergence"
    elif report.skipped:
        outcome = "diverged" if hasattr(report, "wasxfail") else "not applicable"
    else:
        outcome = report.outcome
    state.results.setdefault(ids.parse(name)[1], {})[name] = {
        "outcome": outcome,
        "margin": getattr(report, "margin", None),
        "ulp": getattr(report, "ulp", None),
        "worst": getattr(report, "worst", None) if outcome in ("passed", "failed") else None,
        "message": message if outcome in ("failed", "error", "diverged", "stale divergence") else None,
        "reason": reason,
        "declared": getattr(report, "declared", None),  # a precision's or a raise's check (verify.judged)
        "seconds": round(report.duration, 4),  # a family's cost (publish/costs.py): its first test computes the case
    }


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    test = _conformance_test(item)
    if test is None:
        return report
    if call.when == "call":
        report.margin, report.ulp, report.worst, report.declared = test.margin, test.ulp, test.worst, test.declared
        report.stale_raise = call.excinfo is not None and isinstance(call.excinfo.value, verify.StaleDeclaration)
        if call.excinfo is not None:  # the message: the suite's own read as they are, others with their type
            error = call.excinfo.value
            report.failure = str(error) if isinstance(error, Nonconformance) else f"{type(error).__name__}: {error}"
    if test.test.not_applicable:
        report.reason = test.test.not_applicable
        if report.skipped and isinstance(report.longrepr, tuple):  # -rs names the test, not the generating file
            report.longrepr = (str(item.config.invocation_params.dir / item.nodeid), None, report.longrepr[2])
    divergence = state.divergence_of.get(item.name)
    if divergence is not None and not test.test.not_applicable:  # a test not run keeps its own reason
        report.reason = divergence
        report.declared = getattr(report, "declared", None) or divergence.check({})  # an excuse's kind too
        if call.when == "call" and call.excinfo is None and report.failed:  # a strict xfail that passed
            report.stale_divergence = True
            report.longrepr = (
                f"declared divergence now conforms: remove it from {divergence.source}, or narrow it where its "
                f"pattern still covers failing tests (it said: {divergence.removesuffix(divergences.BY_ADAPTER)})"
            )
    return report


def pytest_sessionfinish(session, exitstatus):
    progress.current = None
    if not state.active or state.spec is None:
        return
    config = session.config
    ran = {name for results in state.results.values() for name in results}
    if not state.writes:  # listing tests runs none, nor do the suite's own tests: no report, no count to miss
        return
    if not ran and exitstatus == pytest.ExitCode.USAGE_ERROR:  # an id that matches no test: nothing ran
        reports.restore(state.reports, state.held)
        return
    complete = state.conformance_collected and not launch.is_narrowed(config)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    try:
        _write_reports(config, complete, reporter)
    except writing.Refused as exc:  # the last finished reports stay where they were before this run
        reports.restore(state.reports, state.held)
        reporter.write_line(f"ERROR: {exc}", red=True)
        session.exitstatus = writing.EXIT
        return
    for line in cache.REFUSED:  # time lost, never a verdict: said once, at the end
        reporter.write_line(line, yellow=True)
    config.stash[_ROOT_CAUSES] = list(filter(None, map(root_cause.line, state.results.values())))  # this session's
    missing = sorted(state.expected - ran)
    if complete and missing:
        reporter.write_line(
            f"FAILED: ran {len(ran)} of {len(state.expected)} conformance tests the spec defines; "
            f"first missing: {', '.join(missing[:5])}",
            red=True,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    for line in declarations.stale(state.divergences, state.loaded, state.expected, state.results) if complete else ():
        reporter.write_line(line, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _write_reports(config, complete, reporter):
    for name in state.loaded if state.conformance_collected else ():
        reports.forget_mutants(state.reports, name)  # the last self-check's record was measured against what ran before
        run = {
            "version": state.versions[name],
            **reports.described(state.loaded[name], state.spec, state.devices[name], config.getoption("device")),
            "spec": state.spec,
            "spec_sha256": state.spec_sha256,
            "numerics": state.numerics,
            "complete": complete,
            "expected": sum(t.adapter == name for t in state.planned),
            "tests": state.results.get(name, {}),
        }
        run, said = (run, "complete") if complete else reports.on_top(state.reports, name, run)
        reports.write_run(state.reports, name, **run)
        reporter.write_line(f"report: {Path(state.reports) / reports.file_name(name)} ({said})")
    reports.release(state.reports, state.held)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """The failure to read first, as the run's last line: after the tracebacks and pytest's count."""
    for said in config.stash.get(_ROOT_CAUSES, ()):
        config.pluginmanager.get_plugin("terminalreporter").write_line(said, red=True)
