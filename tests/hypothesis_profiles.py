"""Hypothesis profiles for the suite's generated tests: "ci" (tox sets it) draws the same examples
every run; "dev", the default, draws new ones; "search", the false-alarm search's larger budget
(SEARCH_EXAMPLES examples a test, 300 unless set; docs/tolerance-model.md)."""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, max_examples=60, deadline=None, print_blob=True)
settings.register_profile("dev", max_examples=200, deadline=None, print_blob=True)
settings.register_profile(
    "search", max_examples=int(os.environ.get("SEARCH_EXAMPLES", "300")), deadline=None, print_blob=True
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
