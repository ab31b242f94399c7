"""explain's K/V head groups on every core (tools/explain/workers.py): the same answer as one process, a worker's
exception raised in the caller, a worker killed a MemoryError, every worker stopped when the caller leaves early,
the workers' rows counted for the progress line, BLAS held to one thread in each."""

import multiprocessing
import os
import signal
import time

import numpy as np
import pytest
from explained import causal_arrays
from threadpoolctl import threadpool_info

from attention_conformance.tools.explain import blocks, problem, workers

pytestmark = pytest.mark.skipif(not workers.usable(2), reason="needs fork and two cores (Linux)")


def test_groups_on_every_core_give_the_bytes_of_one_process(tmp_path, monkeypatch):
    np.savez(tmp_path / "case.npz", **causal_arrays(24, 40, 4, 2, 16, seed=7))
    p = problem.Problem(tmp_path / "case.npz", problem.load(tmp_path / "case.npz"))
    monkeypatch.setattr(blocks, "BLOCK_SCORES", 2 * 40 * 3)
    alone = blocks.stream(p, np.arange(p.T), err=lambda line: None)
    monkeypatch.setattr(blocks, "PARALLEL_FROM", 0)
    monkeypatch.setattr(workers, "each", counting := _Counting(workers.each))
    shared = blocks.stream(p, np.arange(p.T), err=lambda line: None)
    assert counting.calls == 1
    for one, other in zip(alone, shared):
        assert one.keys() == other.keys() and all(np.array_equal(one[n], other[n]) for n in one)


class _Counting:
    def __init__(self, each):
        self.each, self.calls = each, 0

    def __call__(self, *args):
        self.calls += 1
        return self.each(*args)


def _fails(item):
    if item == 3:
        raise ValueError("group 3 overflowed")
    return item


def test_a_workers_exception_is_raised_in_the_caller():
    with pytest.raises(ValueError, match="group 3 overflowed"):
        list(workers.each(_fails, [1, 2, 3, 4], lambda rows: None, 0.01))


def _killed(item):
    if item == 2:
        os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer does
    return item


def test_a_worker_killed_is_a_memory_error_not_a_hang():
    with pytest.raises(MemoryError, match="killed, most likely for memory"):
        list(workers.each(_killed, [1, 2, 3], lambda rows: None, 0.01))


def _slow(item):
    if item > 1:
        time.sleep(60)
    return item


def test_leaving_early_stops_every_worker():
    answers = workers.each(_slow, [1, 2, 3, 4], lambda rows: None, 0.01)
    assert next(answers) == (1, 1)
    answers.close()  # as an exception or Ctrl-C in the caller does
    assert multiprocessing.active_children() == []


def _orphaned(item):
    time.sleep(60)


def test_a_worker_ends_with_its_parent_however_the_parent_ends():
    """The parent killed outright (kill -9, the OOM killer): its workers die with it, never left computing."""
    reader, writer = os.pipe()
    parent = os.fork()
    if parent == 0:  # the parent to be killed: starts workers, says their pids, waits
        os.close(reader)
        context = multiprocessing.get_context("fork")
        answers, counter = context.Queue(), context.Value("q", 0)
        started = [
            context.Process(target=workers._work, args=(_orphaned, [0], answers, counter, os.getpid())) for _ in "ab"
        ]
        for worker in started:
            worker.start()
        os.write(writer, " ".join(str(w.pid) for w in started).encode() + b"\n")
        time.sleep(60)
        os._exit(0)
    os.close(writer)
    pids = [int(pid) for pid in os.read(reader, 100).split()]
    os.kill(parent, signal.SIGKILL)
    os.waitpid(parent, 0)
    for _ in range(200):  # up to 10 s for the kernel to deliver the parent's death
        if not any(_alive(pid) for pid in pids):
            break
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in pids)


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"  # a zombie has ended: only its reaping is left
    except FileNotFoundError:
        return False


def _counts(item):
    assert workers.counted(5)
    return sorted(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas")


def test_workers_count_their_rows_and_run_blas_on_one_thread():
    said = []
    answers = dict(workers.each(_counts, [0, 1, 2], said.append, 0.01))
    assert sorted(answers) == [0, 1, 2] and all(threads == [1] for threads in answers.values())
    assert said[-1] == 15  # every worker's rows, counted where the parent says them
    assert not workers.counted(5)  # the parent counts its own
