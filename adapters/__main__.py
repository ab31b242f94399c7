"""Check an adapter against the contract before running any case.

    python -m adapters check mypackage.my_adapter   # or a registry name, or an entry point name

Prints one line per missing function or wrong signature and exits 1, or "ok" and exits 0.
"""

import argparse
import importlib
import sys

from adapters import contract_problems, module_path


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m adapters", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["check"])
    parser.add_argument("adapter", help="a registry name, an entry point name or a dotted module path")
    args = parser.parse_args(argv)
    try:
        module = importlib.import_module(module_path(args.adapter))
    except Exception as exc:  # noqa: BLE001 - whatever stops the import is the author's first problem
        print(f"{args.adapter}: does not import: {type(exc).__name__}: {exc}")
        return 1
    problems = contract_problems(module)
    for problem in problems:
        print(f"{args.adapter}: {problem}")
    if not problems:
        print(f"{args.adapter}: ok, every contract function is there with the right parameters")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
