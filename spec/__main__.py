"""Validate a spec and every golden tensor it references, without running any adapter.

    python -m spec [SPEC.yaml] [--golden-dir DIR]

Prints "ok" with the case count, or one line naming the file, case and field; exits 1 on error.
"""

import argparse
import sys

import spec
from spec import golden


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m spec", description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", default=spec.SPEC_DIR / "attention.yaml")
    parser.add_argument("--golden-dir", default=golden.GOLDEN_DIR)
    args = parser.parse_args(argv)
    try:
        loaded = spec.load(args.path)
        goldens = golden.Goldens(args.golden_dir)
        for ref in spec.golden_references(loaded):
            goldens.tensor(ref)
    except (spec.SpecError, golden.GoldenError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"ok: {args.path}: {len(loaded.cases)} cases, golden data in {args.golden_dir} verified")
    return 0


if __name__ == "__main__":
    sys.exit(main())
