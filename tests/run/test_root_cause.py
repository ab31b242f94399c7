"""The failure to read first (run/root_cause.py): the earliest stage of the computation, then the smallest case."""

from attention_conformance.run import root_cause


def _failed(op, elements, got=1.0, expected=2.0):
    worst = {"op": op, "elements": elements, "element": [0, 1], "got": got, "expected": expected}
    return {"outcome": "failed", "worst": worst, "message": "beyond"}


def test_the_earliest_stage_is_read_first_not_the_first_id():
    # issue 59: a newcomer's 1/d_k bug failed 29 tests; the alphabetically first was a batched context
    results = {
        "test_context[mine-float32-batched_cube]": _failed("attention", 24),
        "test_scaled[mine-float32-row_scale_binary]": _failed("scale", 8, got=1.853, expected=3.707),
        "test_weights[mine-float32-cat]": _failed("softmax", 36),
        "test_context[mine-float32-cat]": {"outcome": "passed", "worst": None, "message": None},
    }
    assert root_cause.pick(results)[0] == "test_scaled[mine-float32-row_scale_binary]"
    line = root_cause.line(results)
    assert line.startswith("root cause: scale() output 'scaled', case 'row_scale_binary', float32: got 1.853")
    assert "(0.5x)" in line and "the scale stage" in line and "2 other failing test(s)" in line
    assert "attention-conformance explain" in line


def test_at_one_stage_the_smallest_case_and_outputs_of_an_op_at_their_own_stage():
    results = {
        "test_context[mine-float32-gpt2]": _failed("attention", 786432),
        "test_context[mine-float32-cat]": _failed("attention", 18),
        "test_scores[mine-float32-gpt2]": _failed("attention", 786432),  # attention()'s scores come before its context
    }
    assert root_cause.pick(results)[0] == "test_scores[mine-float32-gpt2]"
    del results["test_scores[mine-float32-gpt2]"]
    assert root_cause.pick(results)[0] == "test_context[mine-float32-cat]"


def test_a_raise_or_an_old_report_still_gives_a_line_and_nothing_failed_gives_none():
    raised = {"outcome": "failed", "worst": {"op": "project"}, "message": "mine float32: project() raised KeyError"}
    old = {"outcome": "failed", "worst": None, "message": "a report from before issue 59"}
    results = {"test_context[mine-float32-cat]": old, "test_projection[mine-float32-cube]": raised}
    assert root_cause.pick(results)[0] == "test_projection[mine-float32-cube]"
    assert "project() raised KeyError" in root_cause.line(results)
    assert root_cause.line({"test_context[mine-float32-cat]": old}).startswith(
        "root cause: test_context[mine-float32-cat]: a report from before issue 59"
    )
    assert root_cause.line({"test_context[mine-float32-cat]": {"outcome": "passed"}}) is None


def test_a_ratio_only_where_it_says_something():
    assert root_cause.ratio(1.853, 3.707) == " (0.5x)"
    assert root_cause.ratio(-1.0, 2.0) == root_cause.ratio(0.0, 2.0) == root_cause.ratio(2.0, 0.0) == ""
    assert root_cause.ratio(1.0000001, 1.0) == "" and root_cause.ratio(float("nan"), 1.0) == ""


def test_a_case_that_states_a_convention_says_it_can_be_declared():
    failed = _failed("masked_attention", 4, got=float("nan"), expected=0.0)
    failed["worst"]["convention"] = "fully_masked_rows"
    line = root_cause.line({"test_weights[mine-float32-padding_fully_masked]": failed})
    assert "conventions.fully_masked_rows: if yours is another, declare it in KNOWN_DIVERGENCES" in line


def test_a_case_that_raised_is_not_advised_to_declare_its_convention():
    raised = {"outcome": "failed", "worst": {"op": "window_flag", "convention": "sliding_window"}, "message": "raised"}
    line = root_cause.line({"test_context[mine-float32-window_flag_chunk]": raised})
    assert "declare it" not in line and "raised" in line


def test_a_convention_already_declared_is_not_advised_again_its_side_is_named():
    """An outside trial: a NaN row judged on its declared uniform side was told to declare what it had declared."""
    failed = _failed("masked_attention", 4, got=float("nan"), expected=1 / 6)
    failed["worst"]["convention"] = "fully_masked_rows"
    failed["declared"] = {"kind": "convention", "fact": "uniform_row"}
    line = root_cause.line({"test_weights[mine-float32-padding_fully_masked]": failed})
    assert "declare it" not in line and "judged on the side its declaration 'uniform_row' names" in line


def test_the_numbers_get_the_digits_that_tell_them_apart():
    assert root_cause.shown(-0.18810418, -0.18810437) == ("-0.1881042", "-0.1881044")
    assert root_cause.shown(1.85329, 3.70658) == ("1.85329", "3.70658")
    assert root_cause.shown(0.5, 0.5) == ("0.5", "0.5")


def test_tests_that_raised_are_said_beside_an_earlier_numeric_failure():
    """An outside trial's line named a float64 rounding failure while 66 tests had crashed: both are said."""
    raised = {
        "outcome": "failed",
        "worst": {"op": "varlen_attention", "raised": True},
        "message": "mine float32: raised ValueError\n..",
    }
    misshapen = {"outcome": "failed", "worst": {"op": "project"}, "message": "shape [2, 3] but should be [2, 4]"}
    results = {
        "test_key[mine-float64-cube]": misshapen,  # failed without raising: at its stage, not among the raised
        "test_projection[mine-float64-cube]": _failed("project", 12),
        "test_context[mine-float32-varlen_one]": raised,
        "test_context[mine-float32-varlen_two]": raised,
        "test_context[mine-float64-cat]": _failed("attention", 18),
    }
    line = root_cause.line(results)
    assert line.startswith("root cause: project() output 'projection', case 'cube', float64"), line
    assert "; 2 other failing test(s) come at this stage or after it" in line, line
    first = "test_context[mine-float32-varlen_one]: mine float32: raised ValueError;"
    assert f"; 2 test(s) raised instead of returning, the first {first}" in line, line


def test_the_failure_shared_by_most_dtypes_is_read_first_quoting_its_first_dtype():
    """Issue 74: two convention mismatches failed in every dtype, yet the line named a float64 rounding failure."""
    passed = {"outcome": "passed", "worst": None, "message": None}
    results = {f"test_scaled[mine-{d}-row_scale_binary]": passed for d in ("float32", "float16", "bfloat16")}
    results["test_scaled[mine-float64-row_scale_binary]"] = _failed("scale", 8, got=1.0000001, expected=1.0)
    for dtype in ("float64", "float32", "float16", "bfloat16"):
        results[f"test_weights[mine-{dtype}-alibi_three_heads]"] = _failed("alibi_attention", 150)
    assert root_cause.pick(results)[0] == "test_weights[mine-float64-alibi_three_heads]"
    line = root_cause.line(results)
    assert "case 'alibi_three_heads', float64 (failing in 4 of the 4 dtypes it ran in: float64, float32," in line
    # Shared alike, the earliest stage still comes first (a wrong scale fails every dtype, and everything after it).
    for dtype in ("float32", "float16", "bfloat16"):
        results[f"test_scaled[mine-{dtype}-row_scale_binary]"] = _failed("scale", 8)
    assert root_cause.pick(results)[0] == "test_scaled[mine-float64-row_scale_binary]"
