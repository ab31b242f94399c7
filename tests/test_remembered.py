import numpy as np
import pytest

from attention_conformance import remembered


@pytest.fixture(autouse=True)
def nothing_remembered():
    remembered.forget()
    yield
    remembered.forget()


def _counting(context):
    calls = []

    @remembered.remembered(context)
    def double(x, factor):
        calls.append(1)
        return {"out": np.asarray(x, dtype=np.float64) * factor}

    return double, calls


def test_the_same_numbers_are_answered_once_whatever_their_dtype():
    double, calls = _counting(lambda: None)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    first = double(x, 2)
    again = double(x.astype(np.float64), factor=2)
    assert len(calls) == 1 and first["out"].tobytes() == again["out"].tobytes()


def test_an_answer_is_a_copy_the_caller_may_change():
    double, calls = _counting(lambda: None)
    x = np.ones(4)
    double(x, 3)["out"][...] = 0
    assert double(x, 3)["out"].tolist() == [3.0] * 4 and len(calls) == 1


def test_another_context_shape_or_value_is_another_computation():
    context = ["float64"]
    double, calls = _counting(lambda: context[0])
    double(np.ones(4), 2)
    double(np.ones((2, 2)), 2)  # the same bytes in another shape
    double(np.ones(4), 3)
    context[0] = "float16"
    double(np.ones(4), 2)
    assert len(calls) == 4


def test_arguments_that_are_not_numbers_go_straight_to_the_function():
    @remembered.remembered(lambda: None)
    def name_of(layer):
        return layer.upper()

    assert name_of("mha") == "MHA"
    assert remembered._ANSWERS == {}


def test_memory_stays_within_the_budget(monkeypatch):
    monkeypatch.setattr(remembered, "_MOST_BYTES", 3 * 8 * 1000)
    double, calls = _counting(lambda: None)
    for value in range(5):
        double(np.full(1000, value), 1)  # 8 kB an answer
    assert len(remembered._ANSWERS) == 3
    double(np.full(1000, 0), 1)  # the oldest was dropped: computed again
    assert len(calls) == 6
