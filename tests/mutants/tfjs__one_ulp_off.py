"""Every float output 1 ULP away from tfjs's: within what float32 rounding allows."""

from attention_conformance.adapters import tfjs as base
from tests.mutants._one_ulp import one_ulp_off

EXPECTED = "passes"
globals().update(one_ulp_off(base))
