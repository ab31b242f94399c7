"""The modes the suite knows: how a framework runs an adapter's ops, beside the dtype they run in.

An adapter declares the modes it can run in MODES, {mode: what it runs}, its first the column it has always run;
one that declares none runs eager only. Each (adapter, mode) is a column of its own: its tests, report and matrix
column are named by `column`, the adapter's first mode by the adapter's name alone, so the ids of an adapter
that never heard of modes stay as they were.
"""

MODES = ("eager", "compiled")  # eager: op by op as written; compiled: through the framework's compiler
DEFAULT = {"eager": "op by op, as the framework runs the adapter's code"}  # an adapter that declares no MODES


def declared(adapter):
    """{mode: what it runs} of an adapter module, its first mode first."""
    return dict(getattr(adapter, "MODES", DEFAULT))


def column(adapter, mode, first):
    """The column's name: the adapter's, with "-<mode>" unless `mode` is the adapter's `first`."""
    return adapter if mode == first else f"{adapter}-{mode}"


def split(name):
    """(adapter, mode) of a column name; mode None where the name carries none (the adapter's first)."""
    adapter, _, mode = name.rpartition("-")
    return (adapter, mode) if adapter and mode in MODES else (name, None)
