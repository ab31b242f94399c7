"""The oracle cache: the same numbers as computing them, keyed on everything that computes
them, a damaged entry never trusted, a write whole or absent. (Wrong adapters are still caught with
the cache in use: tests/selfcheck/test_adapter.py runs them against it.) And what fills an empty cache is
computed once, on the work it needs: the first run is nearly as fast as the second."""

import collections
import dataclasses
import threading
from pathlib import Path

import numpy as np
import pytest

from attention_conformance import dtypes, remembered
from attention_conformance.adapters import reference
from attention_conformance.cache import directory as cache_directory
from attention_conformance.cases import golden, loader
from attention_conformance.run import calls, oracle_cache

CASE = "cat"  # the first document's attention over "The cat sat on the mat"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_CONFORMANCE_CACHE", str(tmp_path / "cache"))
    calls.forget()
    yield tmp_path / "cache" / "oracle"
    calls.forget()


def _expected(case_id=CASE, dtype="float64"):
    spec, goldens = loader.load(), golden.Goldens()
    calls.forget()  # the in-memory layer, so each call reads or writes the disk
    return calls.outputs(
        "reference", reference, spec.cases[case_id], "float64", goldens, input_dtype=dtype, oracle=True
    )


def test_a_cached_answer_is_the_computed_one(cache, monkeypatch):
    first = _expected()
    assert len(list(cache.glob(f"*{oracle_cache.SUFFIX}"))) == 1
    monkeypatch.setattr(reference, "attention", lambda **kw: pytest.fail("computed again despite a cache entry"))
    again = _expected()
    assert sorted(again) == sorted(first)
    for name in first:
        assert np.asarray(again[name]).tobytes() == np.asarray(first[name]).tobytes(), name


def test_a_cached_answer_holds_only_the_outputs_its_case_has_expectations_for(cache):
    """A GPT-2-shaped layer's attention weights, unchecked there, would be 96 MiB per entry."""
    assert sorted(_expected()) == sorted(loader.load().cases[CASE].expect)


def test_the_key_covers_inputs_dtype_rounding_and_the_oracle(tmp_path):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    oracle = tmp_path / "oracle.py"
    oracle.write_text("# v1\n")
    base = oracle_cache.key("attention", {"x": x, "n": 2}, None, oracle)
    assert base == oracle_cache.key("attention", {"n": 2, "x": x.copy()}, None, oracle)
    changed = [
        oracle_cache.key("softmax", {"x": x, "n": 2}, None, oracle),
        oracle_cache.key("attention", {"x": x + np.float32(1e-6), "n": 2}, None, oracle),
        oracle_cache.key("attention", {"x": x.astype(np.float16), "n": 2}, None, oracle),
        oracle_cache.key("attention", {"x": x.reshape(3, 2), "n": 2}, None, oracle),
        oracle_cache.key("attention", {"x": x, "n": 3}, None, oracle),
        oracle_cache.key("attention", {"x": x, "n": 2}, "float16", oracle),
    ]
    oracle.write_text("# v2\n")
    changed.append(oracle_cache.key("attention", {"x": x, "n": 2}, None, oracle))
    assert len({base, *changed}) == len(changed) + 1


def test_the_key_covers_the_arithmetic_the_oracle_computes_with(tmp_path, monkeypatch):
    from attention_conformance import deterministic

    arithmetic = tmp_path / "deterministic.py"
    arithmetic.write_bytes(Path(deterministic.__file__).read_bytes())
    monkeypatch.setattr(deterministic, "__file__", str(arithmetic))
    oracle = tmp_path / "oracle.py"
    oracle.write_text("# v1\n")
    before = oracle_cache.key("attention", {"n": 2}, None, oracle)
    arithmetic.write_text(arithmetic.read_text() + "# a change to how products are summed\n")
    assert oracle_cache.key("attention", {"n": 2}, None, oracle) != before


@pytest.mark.parametrize("damage", ["truncate", "flip_a_value", "move_an_array", "not_an_entry", "empty", "vanished"])
def test_a_damaged_entry_is_recomputed_not_trusted(cache, damage):
    good = _expected()
    (entry,) = cache.glob(f"*{oracle_cache.SUFFIX}")
    if damage == "truncate":
        entry.write_bytes(entry.read_bytes()[:200])
    elif damage == "not_an_entry":
        entry.write_text("context: [1, 2, 3]\n")
    elif damage == "empty":
        entry.write_bytes(b"")
    elif damage == "vanished":  # deleted mid-run, by a user's cleanup or another run's
        entry.unlink()
    elif damage == "move_an_array":  # one digit of the header: an array read from 8 bytes further on, well shaped
        data = entry.read_bytes()
        entry.write_bytes(data.replace(b", 0, ", b", 8, ", 1))
    else:  # one bit of a stored value flipped in place (the disk's rot): the entry's CRC-32 no longer matches
        data = bytearray(entry.read_bytes())
        value = np.ascontiguousarray(good[sorted(good)[0]]).tobytes()
        data[data.index(value) + len(value) // 2] ^= 1
        entry.write_bytes(bytes(data))
    again = _expected()
    assert all(np.array_equal(again[name], good[name]) for name in good)
    assert oracle_cache.read(entry) is not None, "the recomputed entry replaced the damaged one"


def test_writes_are_whole_files_or_nothing(cache, monkeypatch):
    def dies(f, whole, crc):
        f.write(whole)  # killed before the entry's last bytes
        raise KeyboardInterrupt

    monkeypatch.setattr(oracle_cache, "_save", dies)
    with pytest.raises(KeyboardInterrupt):
        _expected()
    assert [p for p in cache.parent.rglob("*") if p.is_file()] == []


def test_off_keeps_nothing_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_CONFORMANCE_CACHE", "off")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_directory() is None
    _expected()
    assert list(tmp_path.rglob(f"*{oracle_cache.SUFFIX}")) == []


def test_half_precision_baselines_are_cached_apart_from_the_exact_answer(cache):
    spec, goldens = loader.load(), golden.Goldens()
    case = spec.cases["v1_seed123"]  # checks the context, where rounding every step shows
    calls.forget()
    exact = calls.outputs("reference", reference, case, "float64", goldens, input_dtype="float16", oracle=True)
    with reference.rounding_to(dtypes.np_dtype("float16")):
        plain = calls.outputs(
            "reference", reference, case, "float64", goldens, input_dtype="float16", rounding="float16", oracle=True
        )
    assert len(list(cache.glob(f"*{oracle_cache.SUFFIX}"))) == 2
    assert not np.array_equal(exact["context"], plain["context"])


def test_an_output_under_test_holds_only_what_its_expectations_read():
    """Nor does an adapter's own result, kept for its case's checks: the outputs checked and those a
    check compares against (same_as, differs_from), nothing else (the reference's GPT-2-shaped layer
    weights, never checked, were 96 MiB held per entry)."""
    spec, goldens = loader.load(), golden.Goldens()
    case = spec.cases["identity"]  # attention(): seven outputs, three checked
    only_key = dataclasses.replace(
        case, id="identity_key_only", expect={"key": case.expect["key"]}
    )  # key same_as query
    calls.forget()
    try:
        assert sorted(calls.outputs("reference", reference, case, "float64", goldens)) == ["key", "query", "value"]
        assert sorted(calls.outputs("reference", reference, only_key, "float64", goldens)) == ["key", "query"]
    finally:
        calls.forget()


@pytest.fixture
def exponentials(monkeypatch):
    """How many numbers the oracle's softmax exponentiates: the measure of attention it computes."""
    counted, real = [], reference.exp
    for family in (reference.documents, reference.heads):  # every softmax of the oracle's
        monkeypatch.setattr(family, "exp", lambda x: counted.append(np.size(x)) or real(x))
    monkeypatch.setattr(remembered, "_ANSWERS", collections.OrderedDict())  # nothing computed before this test
    return counted


def test_the_same_heads_are_computed_once_whatever_op_or_dtype_asks(exponentials):
    """fused_attention and multi_head_attention compute the same heads, on float32 inputs and on
    the same numbers in float64: on GPT-2's shape each was seconds of a cold run, so the oracle
    computes them once. Rounding every step (the half-precision baseline) is another computation,
    and an answer given twice is two copies."""
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, (1, 64, 16)).astype(np.float32)
    w = [rng.uniform(-0.3, 0.3, (16, 16)).astype(np.float32) for _ in range(4)]
    heads = reference.fused_attention(x, *w[:3], num_heads=4, causal=True)
    once = sum(exponentials)
    again = reference.multi_head_attention(x, *w, num_heads=4, causal=True)["heads"]
    in_float64 = reference.fused_attention(
        x.astype(np.float64), *(m.astype(np.float64) for m in w[:3]), num_heads=4, causal=True
    )
    assert sum(exponentials) == once > 0
    assert heads.tobytes() == again.tobytes() == in_float64.tobytes()
    heads[...] = 0
    assert reference.fused_attention(x, *w[:3], num_heads=4, causal=True).tobytes() == again.tobytes()
    with reference.rounding_to(np.float16):
        reference.fused_attention(x, *w[:3], num_heads=4, causal=True)
    assert sum(exponentials) == 2 * once


def test_a_masked_head_computes_each_block_of_queries_up_to_its_last_visible_key(exponentials):
    """Causal over 512 keys in blocks of 128 queries: 10/16 of the (T, S) scores (1 + 2 + 3 + 4
    blocks of 128 keys each), and the bytes of the whole (T, S) computation, for the causal mask and
    for one that hides keys at random and every key from some queries."""
    rng = np.random.default_rng(12)
    q, k, v = (rng.standard_normal((2, 512, 8)) for _ in range(3))
    scattered = rng.random((2, 512, 512)) < 0.9
    scattered[:, 200:300] = True
    for hidden in (reference._future(512), scattered):
        exponentials.clear()
        weights, context = reference._masked_head(q, k, v, hidden)
        if hidden is not scattered:
            assert sum(exponentials) == 2 * 512 * 512 * 10 // 16
        whole = reference._masked_softmax(reference.scale(reference.transposed_matmul(q, k), 8), hidden)
        assert weights.tobytes() == whole.tobytes()
        assert context.tobytes() == reference.blend(whole, v).tobytes()


def test_a_run_reads_the_oracles_files_once_and_keys_as_reading_them_would(tmp_path):
    oracle = tmp_path / "oracle.py"
    oracle.write_text("# v1\n")
    files = oracle_cache._computing_files(oracle)
    once = oracle_cache.fingerprint(files)
    assert oracle_cache.key("attention", {"n": 2}, None, oracle, computing=once) == oracle_cache.key(
        "attention", {"n": 2}, None, oracle
    )
    oracle.write_text("# v2\n")
    assert oracle_cache.fingerprint(files) == once  # the code a run imported, whatever the file says now
    assert oracle_cache.key("attention", {"n": 2}, None, oracle) != oracle_cache.key(
        "attention", {"n": 2}, None, oracle, computing=once
    )  # the next run reads the edit


def test_an_entry_gives_back_every_dtype_and_shape_it_was_given_read_only(tmp_path):
    import ml_dtypes

    arrays = {
        "scalar": np.float64(2.5),
        "weights": np.arange(6, dtype=np.float64).reshape(2, 3) / 7,
        "rounded": np.array([1.5, -2.25], dtype=ml_dtypes.bfloat16),
        "hidden": np.array([[True, False]]),
        "count": np.array(1769472),
        "none": np.zeros((0, 4)),
        "swapped": np.arange(3, dtype=">f8"),  # another byte order: given back as this machine's
    }
    oracle_cache._write(tmp_path / f"k{oracle_cache.SUFFIX}", arrays)
    got = oracle_cache.read(tmp_path / f"k{oracle_cache.SUFFIX}")
    assert list(got) == list(arrays)
    for name, value in arrays.items():
        value = np.asarray(value)
        assert got[name].dtype.name == value.dtype.name and got[name].shape == value.shape, name
        assert np.array_equal(got[name], value) and not got[name].flags.writeable, name


def test_an_answer_of_none_is_kept_so_a_warm_run_computes_nothing(cache):
    """A bound the model has none for (gradients', dropout's) was left uncached and computed at every run (an outside
    trial: a warm run said "computing the oracle's answers" for its gradients)."""
    computed = []

    def compute():
        computed.append(True)
        return {"grad_x": None, "grad_w_query": np.ones(3)}

    for _ in range(2):
        got = oracle_cache.cached("gradients", {"x": np.zeros(2)}, "bound float32", oracle_cache.__file__, compute)
        assert got["grad_x"] is None and np.array_equal(got["grad_w_query"], np.ones(3))
    assert computed == [True]


def test_environments_side_by_side_compute_an_answer_once_and_the_others_read_it(tmp_path, monkeypatch):
    # issue 73: parallel environments of a first main job each computed the same float64 answers.
    monkeypatch.setenv("ATTENTION_CONFORMANCE_CACHE", str(tmp_path))
    computing, release, computed = threading.Event(), threading.Event(), []

    def compute():
        computed.append(threading.current_thread().name)
        computing.set()
        release.wait(10)  # the second asks while the first computes
        return {"out": np.ones(3)}

    answers = {}

    def ask():
        answers[threading.current_thread().name] = oracle_cache.cached(
            "op", {"x": np.zeros(2)}, None, __file__, compute
        )

    first = threading.Thread(target=ask, name="first")
    first.start()
    assert computing.wait(10)
    second = threading.Thread(target=ask, name="second")
    second.start()
    second.join(0.2)
    assert second.is_alive()  # waiting for the first's answer, not computing its own
    release.set()
    first.join(10)
    second.join(10)
    assert computed == ["first"] and all((a["out"] == 1).all() for a in answers.values()), (computed, answers)
    assert not list(tmp_path.rglob("*.lock"))  # the lock goes with the answer written
