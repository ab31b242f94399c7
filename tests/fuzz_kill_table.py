"""The fuzz kill table (docs/fuzz.md): each wrong adapter of tests/mutants whose mistake is in an op the fuzzer covers,
fuzzed at the default budget (cases.EXAMPLES_PER_OP per op) on the ops it changes, at each of 20 seeds. Ops are
searched one by one from the seed, so fuzzing its changed ops is what a whole run does on them. Run in a framework's
environment, from the checkout:

    python tests/fuzz_kill_table.py torch [--seeds 20] [--mode compiled]
"""

import argparse
import sys
from pathlib import Path

from conftest import MUTANTS

from attention_conformance.contract import ops, registry
from attention_conformance.tools.fuzz import cases, search


def forward_mutants(adapter_name, mode=None):
    """(mutant, its module, the ops it changes that fuzz covers) for each of the adapter's wrong adapters that should be
    caught, fuzzed on those ops only (the other ops are the real adapter's own). A mistake only another mode makes
    (RUN_MODE: torch.compile's, MLX's shapeless compile) is that column's: with `mode` None, fuzz draws through the
    first mode and leaves them out; with `mode`, those whose RUN_MODE it is, as that mode runs them
    ("<mutant>-<mode>")."""
    real = registry.load(adapter_name)
    for name in (m for m in MUTANTS if m.split("__")[0] == adapter_name):
        mutant = f"tests.mutants.{name}"
        module = registry.load(mutant)
        replaced = [op for op in ops.OPS if getattr(module, op, None) is not getattr(real, op, None)]
        covered = [op for op in replaced if op in cases.COVERED]
        # RUN_ONLY: a mistake only a spec test can name (numbers where its declared raise was: a generated draw stands
        # with the declared case without being it, so right numbers there are no finding).
        if (
            covered
            and getattr(module, "EXPECTED", "caught") == "caught"
            and getattr(module, "RUN_MODE", None) == mode
            and not getattr(module, "RUN_ONLY", None)
        ):
            yield (
                (mutant, module, covered)
                if mode is None
                else (f"{mutant}-{mode}", registry.load(f"{mutant}-{mode}"), covered)
            )


def fuzzed(mutant, module, covered, adapter_name, examples, seed):
    """(found?, distinct cases) of one wrong adapter fuzzed at one seed, in each dtype it runs in until found."""
    calls = 0
    for dtype in getattr(module, "RUN_IN", module.DTYPES[:1]):
        fuzzer = search.Fuzzer(mutant, module, dtype, covered, adapter_name)
        found = fuzzer.run(examples, seed, shrink=0) is not None
        calls += fuzzer.calls
        if found:
            return True, calls
    return False, calls


def kills(adapter_name, seeds, examples=cases.EXAMPLES_PER_OP, mode=None):
    """Yields (mutant, ops, [seeds that found it]) for each of the adapter's forward-op wrong adapters (in `mode`: those
    only that mode makes, fuzzed through it)."""
    column = f"{adapter_name}-{mode}" if mode else adapter_name  # whose known divergences the draws inherit
    for mutant, module, covered in forward_mutants(adapter_name, mode):
        found = [s for s in range(seeds) if fuzzed(mutant, module, covered, column, examples, s)[0]]
        yield mutant.rsplit(".", 1)[-1], covered, found


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("adapter")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--mode", help="the wrong adapters only this mode makes (RUN_MODE), fuzzed through it")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout: tests.mutants.<adapter>__<bug>
    print(f"| wrong adapter | ops fuzzed | found at seeds (of {args.seeds}) |\n|---|---|---|")
    missed = 0
    for name, covered, found in kills(args.adapter, args.seeds, mode=args.mode):
        missed += len(found) < args.seeds
        print(f"| {name} | {', '.join(covered)} | {len(found)} |", flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
