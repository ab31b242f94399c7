"""What each family costs (attention_conformance/publish/costs.py): a column's seconds by its cases' families, the
self-checks' split over the families each wrong adapter ran, a portability rerun's split by the column's own shares
over the families it selected, and the tiers each lands in."""

import json

import pytest
from spec_samples import write_finished_run

from attention_conformance.cases import loader
from attention_conformance.publish import costs
from attention_conformance.run import reports

SPEC = loader.load()


def _case(family):
    return next(case_id for case_id, case in SPEC.cases.items() if case.family == family)


def _result(seconds):
    return {"outcome": "passed", "margin": 0.1, "ulp": 1.0, "worst": None, "message": None, "reason": None} | (
        {} if seconds is None else {"seconds": seconds}
    )


def _write(directory, column, tests):
    write_finished_run(directory, column, SPEC, tests)


@pytest.fixture
def folder(tmp_path):
    fused, masks = _case("fused paths"), _case("causal and masks")
    _write(
        tmp_path,
        "torch",
        {f"test_context[torch-float32-{fused}]": _result(3.0), f"test_context[torch-float32-{masks}]": _result(1.0)},
    )
    _write(tmp_path, "torch-compiled", {f"test_context[torch-compiled-float32-{fused}]": _result(8.0)})
    reports.write_mutants(
        tmp_path,
        "torch",
        ["torch__a", "torch__old"],
        {
            "torch__a": {
                "expected": "fails",
                "cases": 2,
                "caught_by": [],
                "seconds": 4.0,
                "families": ["causal and masks", "fused paths"],
            },
            "torch__old": {"expected": "fails", "cases": 1, "caught_by": []},  # recorded before issue 54: no seconds
        },
    )
    portability = {
        "results": [
            {"adapter": "torch", "seconds": {"as-is": "its own run", "1 thread": 5.0, "AVX2": 3.0}, "pytest_args": []},
            {
                "adapter": "torch-compiled",
                "seconds": {"1 thread": 6.0},
                "pytest_args": ["-k", "fused_paths or decoder_layers"],
            },
            {"adapter": "mlx", "skipped": "fixed kernels", "problems": []},
        ]
    }
    (tmp_path / "portability.json").write_text(json.dumps(portability))
    return tmp_path


def test_each_family_is_charged_what_its_cases_cost_in_every_tier(folder):
    doc = costs.data(folder)
    assert doc["columns"] == {
        "torch": {"fused paths": 3.0, "causal and masks": 1.0},
        "torch-compiled": {"fused paths": 8.0},
    }
    assert doc["first_modes"] == {"fused paths": 3.0, "causal and masks": 1.0}
    assert doc["other_modes"] == {"fused paths": 8.0}
    assert doc["self_checks"] == {"causal and masks": 2.0, "fused paths": 2.0}
    # torch's 8 s of reruns split 3:1 as its own run; torch-compiled's 6 s only over what `-k` kept.
    assert doc["portability"] == pytest.approx({"fused paths": 6.0 + 6.0, "causal and masks": 2.0})
    table = costs.table(doc)
    assert "| fused paths | 3 | 2 | 5 | 8 | 12 | 25 | 83% |" in table
    assert "| all families | 4 | 4 | 8 | 8 | 14 | 30 | 100% |" in table
    assert "| family | torch | torch-compiled |" in table


def test_reports_that_recorded_no_seconds_make_no_table(tmp_path):
    assert costs.data(tmp_path) is None
    _write(tmp_path, "torch", {f"test_context[torch-float32-{_case('fused paths')}]": _result(None)})
    assert costs.data(tmp_path) is None
