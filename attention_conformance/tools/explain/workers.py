"""explain's K/V head groups on every core: a forked process each, so the problem's arrays are shared with them and
never copied, with BLAS held to one thread in each. Measured on 2 cores (Intel Xeon, explain of a T = 2048 bfloat16
Llama-shaped file): one process 32 s; two at once with BLAS's two threads each 74 s each (its threads spin for a core
the other process holds), with one thread each 36 s each. A group's answer is its bytes whichever process gives it."""

import concurrent.futures
import multiprocessing
import os
import sys
from concurrent.futures.process import BrokenProcessPool

from threadpoolctl import threadpool_limits

_task = None  # what each process computes for an item: set before the fork, so no process pickles it
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
    """(item, task(item)) for each of `items`, in as many processes as cores, as each ends: `wait(rows)` is called
    with the rows the workers have counted as each ends and whenever `every` seconds pass with none ended. A task's
    exception is raised here; a worker killed (the out-of-memory killer's way) is a MemoryError, never a hang."""
    global _task
    context = multiprocessing.get_context("fork")
    counter = context.Value("q", 0)
    _task = task
    try:
        with concurrent.futures.ProcessPoolExecutor(
            min(cores(), len(items)), mp_context=context, initializer=_started, initargs=(counter,)
        ) as pool:
            running = {pool.submit(_answer, item) for item in items}
            while running:
                ended, running = concurrent.futures.wait(running, every, concurrent.futures.FIRST_COMPLETED)
                for future in ended:
                    yield future.result()
                wait(counter.value)
    except BrokenProcessPool as exc:
        raise MemoryError(f"a process computing K/V head groups was killed, most likely for memory ({exc})") from exc
    finally:
        _task = None


def _started(counter):
    global _counter
    _counter = counter
    threadpool_limits(1)


def _answer(item):
    return item, _task(item)
