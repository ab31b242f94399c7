import numpy as np
import pytest

from attention_conformance import bounds, remembered


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


def _counting_bound(step):
    """A remembered step of the bound, as the reference's are (its units in the context, its overflows recorded)."""
    calls = []

    @remembered.remembered(bounds.units, bounds.overflows)
    def counted(x):
        calls.append(1)
        return step(x)

    return counted, calls


def test_a_bound_is_known_by_its_value_its_error_and_its_units():
    """The oracle's bound of the fused heads is the multi-head case's (issue 43: 5 s a dtype at GPT-2's shape)."""
    doubled, calls = _counting_bound(lambda x: x * 2.0)
    with bounds.computed_in("float16"):
        first = doubled(bounds.Bounded(np.ones(3)))
        again = doubled(bounds.Bounded(np.ones(3)))
        assert isinstance(again, bounds.Bounded) and again.err.tobytes() == first.err.tobytes()
        doubled(bounds.Bounded(np.ones(3), err=1e-3))  # the same values with another bound
        assert len(calls) == 2
    with bounds.computed_in("bfloat16"):  # another dtype's units
        doubled(bounds.Bounded(np.ones(3)))
    assert len(calls) == 3


def test_an_overflow_is_recorded_again_when_its_answer_is_given_again():
    """A bound past float16's range is refused (tolerance_model.Overflow) whichever case asked for it first."""
    stored, calls = _counting_bound(lambda x: bounds.stored(x * 1.0))
    recorded = []
    for _ in range(2):
        with bounds.computed_in("float16") as overflowed:
            stored(bounds.Bounded(np.full(2, 1e5)))
        recorded.append(overflowed)
    assert recorded[0] and recorded[0] == recorded[1] and len(calls) == 1


def _counted_matmul():
    from attention_conformance import deterministic

    computed = []

    def matmul(a, b):
        computed.append(a.shape)
        return deterministic.matmul(a, b)

    return matmul, computed


@pytest.fixture
def remembering():
    with remembered.remembering_products():
        yield


def test_a_product_of_the_same_operands_is_computed_once_and_given_as_a_copy(remembering):
    matmul, computed = _counted_matmul()
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, (64, 256)), rng.uniform(-1, 1, (256, 256))  # 4 million multiply-adds: worth keeping
    first = remembered.product(matmul, a, b)
    first[0, 0] = np.nan  # the caller's copy: the next one is untouched
    again = remembered.product(matmul, a.copy(), b.copy())
    assert len(computed) == 1 and np.isfinite(again[0, 0])
    assert again.tobytes() == matmul(a, b).tobytes()
    b[0, 0] += 2.0**-40  # one operand's last bits: another product
    remembered.product(matmul, a, b)
    assert len(computed) == 3


def test_a_small_product_is_computed_again_hashing_would_cost_as_much(remembering):
    matmul, computed = _counted_matmul()
    a = np.ones((4, 4))
    remembered.product(matmul, a, a)
    remembered.product(matmul, a, a)
    assert len(computed) == 2 and not remembered._PRODUCTS


def test_products_are_remembered_only_inside_and_forgotten_when_it_ends():
    """The reference run as an adapter under test keeps nothing: its memory is the benchmark's to measure."""
    matmul, computed = _counted_matmul()
    a = np.ones((64, 256))
    remembered.product(matmul, a, a.T @ a)
    remembered.product(matmul, a, a.T @ a)
    assert len(computed) == 2 and not remembered._PRODUCTS
    with remembered.remembering_products():
        with remembered.remembering_products():
            remembered.product(matmul, a, a.T @ a)
        assert remembered._PRODUCTS, "an inner one ending forgets nothing"
        remembered.product(matmul, a, a.T @ a)
    assert len(computed) == 3 and not remembered._PRODUCTS


def test_the_bound_after_the_exact_answer_reuses_its_products_and_gives_the_same_bytes(monkeypatch, remembering):
    """verify.py asks for the exact answer, then the bound: the bound's values are the exact answer's steps."""
    from attention_conformance import deterministic
    from attention_conformance.adapters import reference
    from attention_conformance.cases import golden, inputs, loader
    from attention_conformance.run import tolerance_model

    case = loader.load().cases["gpt2_small_heads_causal"]
    kwargs = inputs.resolve_all(case, "float16", golden.Goldens())
    kwargs["x"] = kwargs["x"][:, :128]  # GPT-2's width and heads, 128 tokens: each projection is worth keeping
    alone = tolerance_model.Derived("float16").multi_head_attention(**kwargs)
    remembered.forget()
    computed = []
    original = deterministic.matmul
    monkeypatch.setattr(deterministic, "matmul", lambda a, b: computed.append(1) or original(a, b))
    reference.multi_head_attention(**kwargs)
    exact_products = len(computed)
    after = tolerance_model.Derived("float16").multi_head_attention(**kwargs)
    assert all(after[name].tobytes() == alone[name].tobytes() for name in alone)
    assert len(computed) - exact_products < exact_products  # the bound computed fewer than the exact answer did
