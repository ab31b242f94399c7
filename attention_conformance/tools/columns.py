"""The columns a built-in adapter's environment runs, read from outside it: the tools that drive every
framework's environment from one process (benchmark, portability) cannot import the frameworks themselves."""

import subprocess


def other_modes(python, name):
    """The columns of the adapter's modes but its first (attention_conformance/modes.py), as `python`, an
    environment that holds its framework, reads its MODES; [] where that Python cannot load it."""
    code = (
        "from attention_conformance import modes; from attention_conformance.contract import registry; "
        f"m = registry.load({name!r}); print(' '.join(modes.column({name!r}, x, m.MODE) for x in modes.declared(m)))"
    )
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    return done.stdout.split()[1:] if done.returncode == 0 else []
