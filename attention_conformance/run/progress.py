"""The line a first run shows while the oracle computes its answers (issue 54), so nobody waits in silence.

The oracle's answers are computed once per machine and inputs and kept (oracle_cache.py); on a first run they are most
of its time, minutes at GPT-2's shape. While they are computed, stderr says how far the run is, per dtype:

    computing the oracle's answers for 24 cases in float32: 9 of 24

A case counts once its answers are there, read or computed; the line shows only in a dtype where one was computed, at
most every EVERY_S seconds, and once more when the last case of that dtype is done. A warm run says nothing. Outside a
pytest run (fuzz, explain, the self-checks' verify_all) nothing was planned and nothing is said.
"""

import sys
import time

EVERY_S = 5.0


class Progress:
    def __init__(self, wanted, write, clock=time.monotonic):
        self.wanted = {dtype: frozenset(cases) for dtype, cases in wanted.items() if cases}  # dtype -> case ids
        self.asked = {dtype: set() for dtype in self.wanted}
        self.computing = set()  # dtypes where an answer was computed, not read
        self.write, self.clock = write, clock
        self.pending, self.said_at = None, None

    def asked_for(self, case_id, dtype, computed):
        """The oracle answered for a case in a dtype: `computed` if it was not in the cache."""
        if case_id not in self.wanted.get(dtype, ()):
            return
        self.asked[dtype].add(case_id)
        if computed:
            self.computing.add(dtype)
        if dtype in self.computing:
            done, of = len(self.asked[dtype]), len(self.wanted[dtype])
            self.pending = (f"computing the oracle's answers for {of} cases in {dtype}: {done} of {of}", done == of)

    def flush(self):
        """Write the latest line if it is due: between tests, where the terminal is the user's, not pytest's capture."""
        if self.pending is None:
            return
        line, last = self.pending
        now = self.clock()
        if last or self.said_at is None or now - self.said_at >= EVERY_S:
            self.write(line)
            self.pending, self.said_at = None, now


current = None  # the running pytest session's Progress (plugin.py), or None


def start(tests, asks_oracle, reporter):
    """A session's Progress over the plan.Tests it runs; `asks_oracle(case, output, dtype)` is verify.py's; the line
    goes to stderr on a line of its own after pytest's terminal `reporter`'s."""
    global current
    wanted = {}
    for t in tests:
        if not t.not_applicable and asks_oracle(t.case, t.output, t.dtype):
            wanted.setdefault(t.dtype, set()).add(t.case.id)

    def write(line):
        if reporter is not None:
            reporter.ensure_newline()
            reporter.flush()
        print(line, file=sys.stderr, flush=True)

    current = Progress(wanted, write)


def asked_for(case_id, dtype, computed):
    if current is not None:
        current.asked_for(case_id, dtype, computed)


def flush():
    if current is not None:
        current.flush()
