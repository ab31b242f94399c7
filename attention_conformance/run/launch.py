"""Launching pytest on the packaged conformance tests: the one way a run starts (`attention-conformance
run`, the benchmark, the portability reruns), isolated from the caller's pytest configuration."""

import json
import os
import sys
from pathlib import Path

from attention_conformance.contract import ids
from attention_conformance.paths import CONFORMANCE_TESTS
from attention_conformance.run import reports

LAST_FAILED = ("--lf", "--last-failed")
_NOT_PASSED = ("failed", "error", "stale divergence")


def run(adapters, pytest_args, plugins=()):
    """pytest on the packaged conformance tests, isolated from the caller's pytest configuration
    (-c devnull): warnings are errors and known divergences strict wherever it runs."""
    import pytest

    if any(a in LAST_FAILED for a in pytest_args):
        pytest_args = _last_failed(adapters, pytest_args)

    # A test id as the run prints it (attention_conformance/conformance.py::test_...), or as a report keys it
    # (test_...[...]), names a test of the installed file.
    # An option's value stays as written: --deselect matches node ids as printed.
    def as_node(arg, previous):
        if previous in _TAKES_A_VALUE:
            return None
        if arg.startswith(ids.NODE_PATH + "::"):
            return str(CONFORMANCE_TESTS) + arg[len(ids.NODE_PATH) :]
        return f"{CONFORMANCE_TESTS}::{arg}" if ids.parse(arg) else None

    nodes = [as_node(a, p) for a, p in zip(pytest_args, [None] + list(pytest_args))]
    given = [node or arg for node, arg in zip(nodes, pytest_args)]
    # Two plugins that do nothing for the spec cost a framework's run 2.5 s (measured with torch,
    # attention-conformance benchmark): hypothesis's imports hypothesis at the summary (1.7 s, its modules
    # assertion-rewritten); log capture attaches a handler to each of torch's ~45 non-propagating loggers
    # in every test phase (0.8 s). A framework's log lines still reach stderr (its own handler, or
    # Python's last resort), which pytest captures per test; --log-* options are not taken.
    args = [
        "-c",
        os.devnull,
        "--rootdir",
        os.getcwd(),
        "-p",
        "attention_conformance.plugin",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:hypothesispytest",
        "-p",
        "no:logging",
        "-W",
        "error",
    ] + ([] if any(nodes) else [str(CONFORMANCE_TESTS)])
    return int(pytest.main(args + [f"--adapter={name}" for name in adapters] + given, plugins=list(plugins)))


def _last_failed(adapters, pytest_args):
    """pytest's --lf, which needs the cache an isolated run does without (a newcomer's first try at rerunning what
    failed): the ids the adapters' last reports hold as not passed, in place of the flag. Where none holds one, every
    test runs, as pytest's --lf does, said in one line."""
    rest = [a for a in pytest_args if a not in LAST_FAILED]

    def value(flag):  # "--flag VALUE" or "--flag=VALUE", as pytest takes either
        given = [b for a, b in zip(rest, rest[1:]) if a == flag] + [
            a.split("=", 1)[1] for a in rest if a.startswith(flag + "=")
        ]
        return given[-1] if given else None

    folder = Path(value("--reports") or reports.DEFAULT_DIR)
    mode = value("--mode")
    failed = []
    for adapter in adapters:
        for column in [f"{adapter}-{mode}"] * bool(mode) + [adapter]:
            try:
                tests = json.loads((folder / reports.file_name(column)).read_text()).get("tests") or {}
            except (OSError, ValueError, AttributeError):
                continue
            failed += sorted(t for t, r in tests.items() if r.get("outcome") in _NOT_PASSED)
            break
    if not failed:
        print(f"--lf: no failed test in the last report(s) in {folder}: every test runs", file=sys.stderr)
    return rest + failed


_TAKES_A_VALUE = {"--deselect", "-k", "-m", "--junitxml", "--junit-xml", "-o", "--override-ini"}


def runs_conformance(config):
    """Whether a pytest session (this launch or any other) was given the spec-driven module among its paths."""
    targets = {CONFORMANCE_TESTS, *CONFORMANCE_TESTS.parents}
    return any(Path(arg.split("::")[0]).resolve() in targets for arg in config.args)


def is_narrowed(config):
    """Whether pytest's own arguments run only part of what the spec defines: its report is then incomplete."""
    return bool(
        config.option.keyword
        or config.option.markexpr
        or config.option.deselect
        or any("::" in a for a in config.args)
        or getattr(config.option, "lf", False)
        or config.option.maxfail
    )
