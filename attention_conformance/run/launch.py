"""Launching pytest on the packaged conformance tests: the one way a run starts (`attention-conformance
run`, the benchmark, the portability reruns), isolated from the caller's pytest configuration."""

import os
from pathlib import Path

from attention_conformance.contract import ids
from attention_conformance.paths import CONFORMANCE_TESTS


def run(adapters, pytest_args, plugins=()):
    """pytest on the packaged conformance tests, isolated from the caller's pytest configuration
    (-c devnull): warnings are errors and known divergences strict wherever it runs."""
    import pytest

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
