"""explain's K/V head groups on every core: a forked process each, so the problem's arrays are shared with them and
never copied, with BLAS held to one thread in each. Measured on 2 cores (Intel Xeon, explain of a T = 2048 bfloat16
Llama-shaped file): one process 32 s; two at once with BLAS's two threads each 74 s each (its threads spin for a core
the other process holds), with one thread each 36 s each. A group's answer is its bytes whichever process gives it."""

import ctypes
import multiprocessing
import os
import queue
import signal
import sys

from threadpoolctl import threadpool_limits

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_counter = None  # in a worker, the rows done by every worker: shared, the parent says it


def cores():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def usable(count):
    """Whether `count` items can go to processes here: fork (Linux; macOS's fork is unsafe with its BLAS) and cores."""
    return count > 1 and cores() > 1 and sys.platform == "linux"


def counted(n):
    """Add `n` rows to the shared count where this is a worker (True); False in the parent, which counts its own."""
    if _counter is None:
        return False
    with _counter.get_lock():
        _counter.value += n
    return True


def each(task, items, wait, every):
    """(item, task(item)) for each of `items`, in as many processes as cores (each its share of them), as each ends:
    `wait(rows)` is called with the rows the workers have counted as each ends and whenever `every` seconds pass with
    none ended. A task's exception is raised here; a worker killed (the out-of-memory killer's way) is a MemoryError,
    never a hang; leaving early (an exception, Ctrl-C) stops every worker."""
    context = multiprocessing.get_context("fork")  # the task and its arrays inherited, never pickled
    counter, answers = context.Value("q", 0), context.Queue()
    count = min(cores(), len(items))
    parent = os.getpid()
    workers = [
        context.Process(target=_work, args=(task, items[n::count], answers, counter, parent), daemon=True)
        for n in range(count)
    ]
    try:
        for worker in workers:
            worker.start()
        for _ in items:
            while True:
                try:
                    item, answer, failed = answers.get(timeout=every)
                    break
                except queue.Empty:
                    if any(worker.exitcode not in (None, 0) for worker in workers):
                        raise MemoryError(
                            "a process computing K/V head groups was killed, most likely for memory"
                        ) from None
                    if all(worker.exitcode is not None for worker in workers):  # an answer that could not be sent
                        raise RuntimeError(
                            "explain's worker processes ended without every K/V head group's answer"
                        ) from None
                    wait(counter.value)
            if failed is not None:
                raise failed
            yield item, answer
            wait(counter.value)
    finally:  # every worker stopped before any is waited for: a second Ctrl-C while waiting leaves none running
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
        for worker in workers:
            if worker.pid is not None:
                worker.join()
        answers.close()


def _work(task, items, answers, counter, parent):
    global _counter
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops the workers
    # Killed with the parent, however it ends (kill -9, the OOM killer, a scheduler's SIGTERM): an outside trial found
    # both workers orphaned, computing for minutes, then blocked for good holding 450 MB each.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent ended before prctl took hold
        os._exit(1)
    _counter = counter
    threadpool_limits(1)
    for item in items:
        try:
            answers.put((item, task(item), None))
        except Exception as exc:  # noqa: BLE001 - raised in the parent, as the same computation in one process would be
            answers.put((item, None, exc))
            return
