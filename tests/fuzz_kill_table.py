"""The fuzz kill table (docs/fuzz.md): each wrong adapter of tests/mutants whose mistake is in an op the fuzzer covers,
fuzzed at the default budget (cases.EXAMPLES_PER_OP per op) on the ops it changes, at each of 20 seeds. Ops are
searched one by one from the seed, so fuzzing its changed ops is what a whole run does on them. Run in a framework's
environment, from the checkout:

    python tests/fuzz_kill_table.py torch [--seeds 20]
"""

import argparse
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]

from conftest import MUTANTS  # noqa: E402

from attention_conformance.contract import ops, registry  # noqa: E402
from attention_conformance.tools.fuzz import cases, search  # noqa: E402


def kills(adapter_name, seeds, examples=cases.EXAMPLES_PER_OP):
    """Yields (mutant, ops, [seeds that found it]) for each of the adapter's forward-op wrong adapters."""
    real = registry.load(adapter_name)
    for name in (m for m in MUTANTS if m.split("__")[0] == adapter_name):
        module = registry.load(f"tests.mutants.{name}")
        replaced = [op for op in ops.OPS if getattr(module, op, None) is not getattr(real, op, None)]
        covered = [op for op in replaced if op in cases.COVERED]
        if not covered or getattr(module, "EXPECTED", "caught") != "caught" or getattr(module, "RUN_MODE", None):
            continue  # a mistake only another mode makes (torch.compile's) is that column's: fuzz runs eager here
        found = []
        for seed in range(seeds):
            for dtype in getattr(module, "RUN_IN", module.DTYPES[:1]):
                fuzzer = search.Fuzzer(f"tests.mutants.{name}", module, dtype, covered, adapter_name)
                if fuzzer.run(examples, seed, shrink=0) is not None:
                    found.append(seed)
                    break
        yield name, covered, found


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("adapter")
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args(argv)
    print(f"| wrong adapter | ops fuzzed | found at seeds (of {args.seeds}) |\n|---|---|---|")
    missed = 0
    for name, covered, found in kills(args.adapter, args.seeds):
        missed += len(found) < args.seeds
        print(f"| {name} | {', '.join(covered)} | {len(found)} |", flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
