"""Deliberately wrong adapters (and near misses) that check the checker.

A file is named <adapter>__<what it does>.py and runs when <adapter> is under test.
Each module is a full adapter: it starts from the real one and replaces one function.
EXPECTED = "caught": the spec must fail it somewhere, and fail every case in MUST_FAIL with
wrong numbers (not a crash). EXPECTED = "passes": a harmless difference that must not fail.
A mutant runs the cases of the ops it replaces (every other case would call the real adapter's own
function) in its adapter's first dtype, or in the dtypes its RUN_IN names.
"""
