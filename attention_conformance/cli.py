"""The front door: `attention-conformance COMMAND`, from any directory.

    attention-conformance run --adapter NAME [pytest args]   the spec against an adapter, writing reports/
    attention-conformance check MODULE                       an adapter against the contract, before a run
    attention-conformance summary [--reports DIR ...]        the per-framework table, kill rate, matrix and
                                                             page, merged from one reports folder per machine
    attention-conformance validate [SPEC] [--golden-dir D]   a spec and every golden it uses, no adapter run
    attention-conformance template [NAME]                    print the adapter template (or a built-in
                                                             adapter's source) to start from
    attention-conformance benchmark --adapter NAME           the suite's own speed and memory, as JSON
    attention-conformance publish [--reports DIR]            in the checkout: the docs' tables
                                                             from the reports
    attention-conformance portability --adapter NAME         the spec rerun under switches that change
                                                             kernels and threads: the same outcomes?
    attention-conformance fuzz --adapter NAME [--seed S]     generated cases judged by the tolerance model
    attention-conformance explain FILE.npz                   your own tensors: is the difference a bug
                                                             or rounding? (NumPy only)
    attention-conformance examples DIR                       example files for explain, of the kinds
                                                             issue trackers ask about
    attention-conformance docs [PAGE]                        the manual: its pages, or one printed
    attention-conformance sweep --adapter NAME               measure the tolerance model over random
                                                             shapes on one framework (spec/model.yaml)
    attention-conformance sensitivity [--json PATH]          the smallest error of rounding's shape the
                                                             model names, beside flash-attention's rule

NAME is a built-in adapter, an entry point name, or any importable module. Results go to stdout;
problems, and a failing verdict, to stderr, one line each (`run` is pytest's: its whole report, the root cause
line included, on stdout). Exit codes: 0 ok, 1 failures or errors
found, 2 wrong usage, 4 (run) a usage error pytest reported, 5 (run) no test selected (a -k that matches nothing).
"""

import argparse
import importlib
import os
import sys

from attention_conformance import dtypes, modes, writing
from attention_conformance.cases import golden, loader
from attention_conformance.contract import ops, registry
from attention_conformance.paths import DOCS_DIR, PUBLISHED_DIR, SPEC_DIR
from attention_conformance.run import launch, reports
from attention_conformance.tools import sensitivity
from attention_conformance.tools.fuzz import cases as fuzz_cases


def validate(path, golden_dir):
    try:
        loaded = loader.load(path)
        goldens = golden.Goldens(golden_dir)
        for ref in loader.golden_references(loaded):
            goldens.tensor(ref)
    except (loader.SpecError, golden.GoldenError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"ok: {path}: {len(loaded.cases)} cases, golden data in {golden_dir} verified")
    return 0


def check(name):
    """Import the module, check its signatures, call every function once on tiny inputs, in each of its modes."""
    from attention_conformance.tools import preflight

    name = modes.split(name)[0]  # a column's name: its adapter, every mode of which is checked
    try:
        module = importlib.import_module(registry.module_path(name))
    except Exception as exc:  # noqa: BLE001 - whatever stops the import is the author's first problem
        print(f"{name}: does not import: {type(exc).__name__}: {exc}{registry.import_hint(name, exc)}", file=sys.stderr)
        return 1
    registry.declare_rest(module)
    registry.pin(module)  # as `run` does: JAX computes float64 only with x64 switched on
    problems, said = registry.contract_problems(module), []
    if not problems:  # each mode as `run` loads it: its functions through in_mode, its own NOT_APPLICABLE keys
        declared_modes = list(modes.declared(module))
        first = preflight.problems(registry.in_mode(module, name, declared_modes[0]), name, said)
        problems = first + [
            f"in mode {mode}: {problem}"
            for mode in declared_modes[1:]
            for problem in preflight.problems(registry.in_mode(module, name, mode), f"{name}-{mode}")
            if problem not in first
        ]
    declared = {k for k, v in getattr(module, "NOT_APPLICABLE", {}).items() if isinstance(v, str)}
    skipped = [op for op in ops.OPS if op in declared or not hasattr(module, op)]
    for line in said:
        print(f"{name}: {line}")
    sys.stdout.flush()  # before the problems on stderr, where the two streams share a terminal
    for problem in problems:  # what is wrong first: an outside trial found a problem under a 37-name list
        print(f"{name}: {problem}", file=sys.stderr)
    sys.stderr.flush()
    if skipped:  # so that a forgotten stub is seen before a run reports its cases not applicable
        print(
            f"{name}: {len(skipped)} of {len(ops.OPS)} functions not called (declared not applicable, or optional "
            "and left out): " + ", ".join(skipped)
        )
    if problems:
        sys.stdout.flush()
        print(f"{name}: {len(problems)} problem(s), the first lines above", file=sys.stderr)
    else:
        print(
            f"{name}: ok, every contract function is there, takes the right parameters and returns the right "
            f"keys, shapes and dtypes on tiny inputs (modes: {', '.join(modes.declared(module))}); "
            f"`attention-conformance run --adapter {name}` checks the numbers"
        )
    return 1 if problems else 0


def manual(page):
    """docs/PAGE.md printed, or the pages listed: a user who installed from pip has no checkout to read them in."""
    pages = sorted(p.stem for p in DOCS_DIR.glob("*.md"))
    if page is None:
        for name in pages:
            print(f"{name:16} {DOCS_DIR / (name + '.md')}")
        print("attention-conformance docs PAGE prints one")
        return 0
    if page.removesuffix(".md") not in pages:
        print(f"error: no page {page!r} in {DOCS_DIR}: the pages are {', '.join(pages)}", file=sys.stderr)
        return 2
    print((DOCS_DIR / f"{page.removesuffix('.md')}.md").read_text(), end="")
    return 0


def explain_keys():
    from attention_conformance.tools.explain import problem

    return problem.HELP


def explain_options(parser):
    from attention_conformance.tools.explain import command

    command.options(parser)


def _drawing(parser, examples, each=""):
    """The arguments of a command that draws cases on one adapter (fuzz, sweep)."""
    parser.add_argument("--adapter", required=True, metavar="NAME")
    parser.add_argument(
        "--examples", type=int, default=examples, metavar="N", help=f"cases to draw{each} (default {examples})"
    )
    parser.add_argument(
        "--seed", type=int, default=0, metavar="S", help="the same seed draws the same cases (default 0)"
    )


INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped


def main(argv=None):
    """The command's exit code (docs/usage.md: exit codes); a file the machine will not let it write is one line."""
    try:
        return _command(argv)
    except writing.Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return writing.EXIT
    except KeyboardInterrupt:  # Ctrl-C: one line and the shell's code for SIGINT, not a traceback (every file whole)
        print("interrupted: nothing half-written; the last complete files stay where they were", file=sys.stderr)
        return INTERRUPTED


def _command(argv):
    parser = argparse.ArgumentParser(
        prog="attention-conformance",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 2)[2],
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser(
        "run",
        help="the spec against adapters; other arguments go to pytest",
        description="Run the spec against adapters. Every other argument goes to pytest: -k EXPR (a case id, an op, "
        "a family with underscores such as rotary_embeddings or soft_capping, a dtype), -q, -rs, "
        "--junitxml FILE, --collect-only, a test id as printed, and the suite's own --mode MODE (eager or compiled: "
        "the adapter as that mode runs it, its own column <adapter>-<mode>, docs/modes.md), --reports DIR (where "
        "<adapter>.json goes, default ./reports), --device, --golden-dir, --spec, --known-divergences "
        "(`pytest --help` lists them under attention-conformance).",
    )
    run_parser.add_argument(
        "--adapter",
        action="append",
        required=True,
        metavar="NAME",
        help="a built-in adapter, an entry point name, or a module importable from here (my_attention for "
        "./my_attention.py); repeatable",
    )
    commands.add_parser(
        "check",
        help="an adapter against the contract (signatures, then each function once on tiny inputs)",
        description="Check an adapter before a run: every contract function is there with its parameters, and "
        "returns the right keys, shapes and dtypes on tiny inputs. Numbers are compared by `run`.",
    ).add_argument("module", metavar="NAME", help="the adapter's module name, as for run --adapter")
    summary_parser = commands.add_parser(
        "summary",
        help="the table, the kill rate, the matrix and the page (index.html) from the reports",
        description="The per-adapter table, the wrong-adapter kill rate and the conformance matrix, from one reports "
        "folder or merged from several; matrix.md, matrix.json, matrix.png and the page index.html (one file to open "
        "in a browser) go to --out. Exit 1 unless every adapter ran completely and conforms.",
    )
    summary_parser.add_argument(
        "--reports",
        action="append",
        metavar="DIR",
        help="a reports folder (repeatable: one per machine, merged into one table and matrix; default ./reports)",
    )
    summary_parser.add_argument(
        "--with-published",
        action="store_true",
        help="put the published run's reports of every built-in adapter (shipped with the package, labelled "
        "'published <date>' with their machine) beside your own",
    )
    summary_parser.add_argument(
        "--adapter",
        action="append",
        metavar="NAME",
        help="these adapters must have reported, each MISSING otherwise (default: whatever the folders hold)",
    )
    summary_parser.add_argument(
        "--out",
        default=reports.DEFAULT_DIR,
        metavar="DIR",
        help="where matrix.md, matrix.json, matrix.png and the page index.html go (default ./reports)",
    )
    summary_parser.add_argument(
        "--html",
        metavar="PATH",
        help="write the page here instead of index.html in --out; a folder gets index.html inside it (one "
        "self-contained file: open it in a browser)",
    )
    validate_parser = commands.add_parser("validate", help="a spec and its golden data")
    validate_parser.add_argument("path", nargs="?", default=SPEC_DIR / "attention.yaml")
    validate_parser.add_argument("--golden-dir", default=golden.GOLDEN_DIR)
    commands.add_parser(
        "docs", help="the manual, installed with the package: its pages, or one page printed"
    ).add_argument("page", nargs="?", metavar="PAGE", help="a page's name, e.g. contract (docs/contract.md)")
    commands.add_parser(
        "template", help="print the adapter template, or a built-in adapter's source to start from"
    ).add_argument(
        "adapter",
        nargs="?",
        choices=registry.NAMES,
        metavar="NAME",
        help=f"a built-in adapter: {', '.join(registry.NAMES)}",
    )
    bench_parser = commands.add_parser(
        "benchmark",
        help="the suite's own cost against the framework's floor",
        description="Time the whole spec against the framework's own import and compute "
        "(docs/speed.md). With --adapter: the tables on stderr, "
        "the figures as JSON on stdout's last line.",
    )
    bench_parser.add_argument("--adapter", metavar="NAME", help="this adapter (yours too), in this environment")
    bench_parser.add_argument("--envs", help="tox's work folder: measure every framework in its own environment")
    bench_parser.add_argument("--scratch", help="with --adapter: where the whole-spec run's report goes")
    bench_parser.add_argument(
        "--tox-ini",
        metavar="FILE",
        help="with --envs: also time the main job, `tox -m conformance -p auto`, "
        "against its floor (needs tox in this environment)",
    )
    publish_parser = commands.add_parser(
        "publish",
        help="in the checkout: the summary table into docs/usage.md and the benchmark's "
        "into docs/speed.md, from the reports (their data kept in docs/results/)",
    )
    publish_parser.add_argument(
        "--reports",
        default=reports.DEFAULT_DIR,
        metavar="DIR",
        help="a complete, conforming run of every built-in adapter, and benchmark.json if any (default ./reports)",
    )
    port_parser = commands.add_parser(
        "portability",
        help="the spec rerun under the switches that change kernels; other arguments go to pytest",
        usage="attention-conformance portability (--adapter NAME | --envs DIR) [pytest args]",
        description="Rerun the spec under one thread, AVX2 caps and no SIMD dispatch; exit 1 "
        "if any test's outcome changes. Other arguments (-k ...) go to pytest.",
    )
    port_parser.add_argument("--adapter", metavar="NAME", help="this adapter, in this environment")
    port_parser.add_argument("--envs", help="tox's work folder: every built-in adapter in its own environment")
    explain_parser = commands.add_parser(
        "explain",
        help="your own attention's inputs and result: a bug, or rounding?",
        description="Judge the result in FILE.npz against the float64 oracle with the tolerance model of its dtype.\n"
        "Exit 0 within, 1 beyond, 2 bad input, 6 no answer (rows where an output of zeros would be within too: "
        "judge float32 there), 74 a --json or --allowance file it could not write (the verdict is printed first). "
        "FILE.npz holds (np.savez) these keys:\n\n" + explain_keys(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    explain_options(explain_parser)
    fuzz_parser = commands.add_parser(
        "fuzz",
        help="generated cases over the forward ops, judged by the tolerance model; "
        "a finding is written as a spec case and a standalone reproducer",
        description="Draw cases in the spec's vocabulary where implementations go wrong and judge each output by "
        "the tolerance model (docs/fuzz.md). Exit 0 no finding, 1 a finding (its spec case and reproducer in "
        "--out), 2 wrong usage.",
    )
    _drawing(fuzz_parser, fuzz_cases.EXAMPLES_PER_OP, " per op")
    fuzz_parser.add_argument("--dtype", choices=dtypes.DTYPES, help="default: the adapter's first dtype")
    fuzz_parser.add_argument(
        "--mode", choices=modes.MODES, help="the adapter as this mode runs it (default: its first, its MODES)"
    )
    fuzz_parser.add_argument(
        "--op", action="append", metavar="OP", help="only this forward op (repeatable; default: every one covered)"
    )
    fuzz_parser.add_argument(
        "--out", default="fuzz-findings", metavar="DIR", help="where a finding goes (default ./fuzz-findings)"
    )
    commands.add_parser(
        "examples", help="write example files for explain, of the kinds issue trackers ask about"
    ).add_argument("directory", metavar="DIR", help="a directory (made if absent, its parent must exist)")
    sweep_parser = commands.add_parser(
        "sweep",
        help="measure the tolerance model over random shapes on one framework, in its environment",
        description="Every op the sweep covers, on shapes drawn from the seed alone, in every dtype the adapter "
        "declares: the share of the derived bound used and the k needed (docs/tolerance-model.md). Exit 1 on an "
        "output beyond the model that no known divergence declares.",
    )
    _drawing(sweep_parser, 150)
    sweep_parser.add_argument("--json", metavar="PATH", help="write every measurement and the summary here")
    sweep_parser.add_argument(
        "--model", metavar="PATH", help="the model file to judge against (default spec/model.yaml)"
    )
    sweep_parser.add_argument("--dtype", action="append", choices=dtypes.DTYPES, help="only this dtype (repeatable)")
    sweep_parser.add_argument("--op", action="append", metavar="OP", help="only this op (repeatable)")
    sweep_parser.add_argument("--verbose", action="store_true", help="a line per measurement")
    sensitivity_parser = commands.add_parser(
        "sensitivity", help="the smallest error of rounding's shape the model names, beside flash-attention's rule"
    )
    sensitivity_parser.add_argument("--seed", type=int, default=0, help="the inputs' seed (default 0)")
    sensitivity_parser.add_argument("--json", metavar="PATH", help="write every measurement here too")
    sensitivity_parser.add_argument("--family", action="append", choices=sensitivity.FAMILIES, help="only this one")
    args, rest = parser.parse_known_args(argv)
    if rest and args.command not in ("run", "portability"):
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command in ("run", "check", "portability", "fuzz", "benchmark", "sweep") and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` would: an adapter beside you imports by its name
    if args.command == "run":
        return launch.run(args.adapter, rest)
    if args.command == "fuzz":
        from attention_conformance.tools.fuzz import command

        adapter = f"{args.adapter}-{args.mode}" if args.mode else args.adapter  # the column, as registry.load reads it
        return command.main(adapter, args.examples, args.seed, args.dtype, args.out, args.op)
    if args.command == "check":
        return check(args.module)
    if args.command == "validate":
        return validate(args.path, args.golden_dir)
    if args.command == "docs":
        return manual(args.page)
    if args.command == "template":
        from attention_conformance.tools import template

        print(template.text(args.adapter), end="")
        return 0
    if args.command == "summary":
        from attention_conformance.publish import summary

        given = [os.path.realpath(d) for d in args.reports or []]
        if len(set(given)) < len(given):
            parser.error("summary: the same --reports folder is given twice")

        if args.html is not None and not args.html.strip():
            parser.error("summary: --html needs a path (a file, or a folder to write index.html in)")
        folders = (args.reports or [reports.DEFAULT_DIR]) + ([PUBLISHED_DIR] if args.with_published else [])
        return summary.main(folders, args.adapter, args.out, args.html)
    if args.command == "examples":
        from attention_conformance.tools import examples

        return examples.main(args.directory)
    if args.command == "sweep":
        from attention_conformance.tools import sweep, sweep_cases

        if args.op and not set(args.op) <= set(sweep_cases.SWEEP_OPS):
            parser.error(f"sweep: --op takes {', '.join(sweep_cases.SWEEP_OPS)}")
        return sweep.main(
            args.adapter, args.examples, args.seed, args.json, args.model, args.dtype, args.op, args.verbose
        )
    if args.command == "sensitivity":
        if args.seed < 0:  # NumPy's generator takes no negative seed: its traceback, not a usage line, otherwise
            parser.error("sensitivity: --seed must be at least 0")
        return sensitivity.main(args.seed, args.json, args.family)
    if args.command == "explain":
        from attention_conformance.tools.explain import command

        return command.main(args.file, args.json, args.allowance, args.rows, args.seed)
    if args.command == "portability":
        from attention_conformance.tools import emulation

        return emulation.main(args.adapter, args.envs, rest)
    if args.command == "publish":
        from attention_conformance.publish import tables

        return tables.main(args.reports)
    from attention_conformance.tools import benchmark

    return benchmark.main(args.adapter, args.envs, args.scratch, args.tox_ini)


if __name__ == "__main__":
    sys.exit(main())
