"""Where a figure was measured: the CPU, its instruction set, the threads, and the switches set.

Margins, ULPs and seconds all move with the machine (torch's half precision is ~100x slower on a
CPU without native float16/bfloat16; BLAS kernels differ per CPU), so every report and table
carries this record. Reads /proc/cpuinfo and the environment; imports no framework.
"""

import os
import platform
from pathlib import Path

# Environment variables that change which kernels run, or how many threads: each is read by a
# framework at import (docs/portability.md).
SWITCHES = (
    "ATEN_CPU_CAPABILITY",
    "ONEDNN_MAX_CPU_ISA",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NPY_DISABLE_CPU_FEATURES",
    "XLA_FLAGS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    "TF_ENABLE_ONEDNN_OPTS",
)
# cpuinfo flag -> what it means here, widest first; the half-precision ones decide torch's speed.
_ISA = (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"), ("sse4_2", "SSE4.2"), ("asimd", "NEON"))
_HALF = (
    ("amx_bf16", "AMX-BF16"),
    ("avx512_fp16", "AVX512-FP16"),
    ("avx512_bf16", "AVX512-BF16"),
    ("fphp", "FP16"),
    ("bf16", "BF16"),
)


def _cpuinfo():
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())  # the first processor stands for all
    return fields


def cpu_flags():
    """The CPU's feature flags, as /proc/cpuinfo names them (empty where it cannot be read)."""
    info = _cpuinfo()
    return set((info.get("flags") or info.get("Features") or "").split())


def describe():
    """{"host", "cpu", "isa", "half", "threads", "switches"}: this machine, as a report records it."""
    info, flags = _cpuinfo(), cpu_flags()
    try:
        threads = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        threads = os.cpu_count()
    return {
        "host": platform.node(),
        "cpu": info.get("model name") or platform.processor() or platform.machine(),
        "isa": next((name for flag, name in _ISA if flag in flags), platform.machine()),
        "half": [name for flag, name in _HALF if flag in flags],
        "threads": threads,
        "switches": {name: os.environ[name] for name in SWITCHES if name in os.environ},
    }


def one_line(m=None):
    """'Intel(R) Xeon(R) Processor @ 2.80GHz, AVX-512 (no native half precision), 2 threads'."""
    m = m or describe()
    half = f"native {', '.join(m['half'])}" if m["half"] else "no native half precision"
    switches = "".join(f", {k}={v}" for k, v in m["switches"].items())
    return f"{m['cpu']}, {m['isa']} ({half}), {m['threads']} threads{switches}"
