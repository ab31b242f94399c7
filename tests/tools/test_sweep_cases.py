"""The model sweep's cases (attention_conformance/tools/sweep_cases.py): drawn from the seed alone, in range, and
answered by the same oracle as adapters/reference/."""

import numpy as np

from attention_conformance.adapters import reference
from attention_conformance.tools import sweep_cases


def test_the_sweeps_oracle_is_the_references():
    """The sweep's exact computation (tolerance_model.attend on the reference's projections) gives the
    numbers adapters/reference/ does, on the sweep's own small cases of every op."""
    seen = set()
    for index in range(200):
        case = sweep_cases.draw_case(0, index)
        s = case["shape"]
        if case["op"] in seen or max(s["B"], 1) * s["N"] * s["T"] * s["S"] * s["H"] > 20000:
            continue
        seen.add(case["op"])
        expected = sweep_cases.oracle(case["op"], case["inputs"])
        got = getattr(reference, case["op"])(**case["inputs"])
        got = got if isinstance(got, dict) else {next(iter(expected)): got}
        for name, value in expected.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-13, atol=1e-15, err_msg=f"{case['op']} {name} {s}")
    assert seen == set(sweep_cases.SWEEP_OPS)


def test_the_sweeps_cases_depend_on_the_seed_alone_and_stay_in_range():
    for index in range(40):
        a, b = sweep_cases.draw_case(3, index), sweep_cases.draw_case(3, index)
        assert a["op"] == b["op"] and a["shape"] == b["shape"]
        for name, value in a["inputs"].items():
            np.testing.assert_array_equal(value, b["inputs"][name])
        s = a["shape"]
        assert 1 <= s["S"] <= sweep_cases.MAX_T and 1 <= s["H"] <= sweep_cases.MAX_H
        assert 1 <= s["N"] <= sweep_cases.MAX_HEADS and s["N"] % s["K"] == 0
        assert max(s["B"], 1) * s["N"] * s["S"] * s["S"] <= sweep_cases.CELLS
        if "mask" in a["inputs"]:
            assert not a["inputs"]["mask"].all(axis=-1).any()  # never a fully hidden row: that is a convention
