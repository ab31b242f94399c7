"""PyTorch's modes: the adapter as written (eager), and the same op functions through torch.compile (compiled)."""

import contextlib
import functools
import os
import warnings

import numpy as np
import torch

from .shared import _map, _np, _t

MODES = {
    "eager": "PyTorch eager on the CPU: each torch call of the op runs its own ATen kernel as it is reached.",
    "compiled": (
        "torch.compile(op) with its default Inductor backend on the CPU (one compiled object per op, automatic "
        "dynamic shapes, Python scalars as constants): TorchDynamo traces the op's torch calls into FX graphs "
        "that Inductor fuses into C++ kernels; what it cannot trace (a module's construction, numpy) runs eagerly "
        "between graphs."
    ),
}

# How many graphs one op's compiled object may hold per code object before dynamo raises rather than runs it
# eagerly: each dtype, each constant (num_heads, causal, layer, ...) and each rank is a graph of its own; the
# spec needs at most 32 (rotary_embedding, measured), twice that leaves room for a longer spec.
_RECOMPILE_LIMIT = 64

_DYNAMO = {
    # Past the limit dynamo would otherwise run the op eagerly, silently: a compiled column of eager results.
    "fail_on_recompile_limit_hit": True,
    # Sizes, heads, caps and scales are constants to the graph, as the contract reads them: otherwise
    # dynamo makes an int that changes between calls symbolic, and a float a graph input.
    "specialize_int": True,
    "specialize_float": True,
    # No profile of an earlier process decides which shapes are dynamic: each process compiles the same graphs.
    "automatic_dynamic_local_pgo": False,
}
# What the compiler says while it compiles, not about the result: warnings are errors in a run (launch.py), so each
# would fail its test. Inductor falls back to eager for complex numbers (the interleaved RoPE's view_as_complex);
# dynamo reads a non-leaf tensor's .grad while it traces self_attention_v1's no-grad check; Inductor's first compile
# imports torch.utils.mkldnn, which defines a class with the deprecated torch.jit.script_method. All measured.
_COMPILER_NOTES = (
    "`torch.jit.script_method` is deprecated",
    "Torchinductor does not support code generation for complex operators",
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed",
)
# The spec pins seeds to eager's random stream (dropout, initialisation); Inductor's own generator draws other numbers.
_INDUCTOR = {"fallback_random": True}


def in_mode(mode, op):
    """`op` as `mode` runs it: NumPy in, NumPy out, as op itself."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: one of {list(MODES)}")
    return op if mode == "eager" else _compiled(op)


@functools.cache  # one torch.compile object per op, its graphs kept between calls
def _compiled(op):
    _cache_apart_per_capability()
    # _np's own frame is never compiled (traced callers still inline it): called from a frame dynamo runs eagerly it
    # converts as in eager, where compiled it would hand back the tensor and guard on each new nn.Parameter's id, a
    # recompile per parameter (sgd_step raised FailOnRecompileLimitHit at its 22nd call in a process, measured).
    torch._dynamo.eval_frame.skip_code(_np.__code__)
    # isolate_recompiles: helpers shared by ops (_rotate, _mha, ...) count each op's graphs apart.
    with _quiet():  # torch.compile imports Inductor here
        compiled = torch.compile(op, dynamic=None, recompile_limit=_RECOMPILE_LIMIT, isolate_recompiles=True)

    @functools.wraps(op)
    def run(*args, **kwargs):
        args, kwargs = _map((args, kwargs), np.ndarray, _t)
        with torch._dynamo.config.patch(_DYNAMO), torch._inductor.config.patch(_INDUCTOR), _quiet():
            return _map(compiled(*args, **kwargs), torch.Tensor, _np)

    return run


def _cache_apart_per_capability():
    # Inductor's on-disk caches are not keyed by the CPU capability: after a run under AVX-512 filled one, a run
    # with ATEN_CPU_CAPABILITY=avx2 got wrong numbers from it (fused_cat_sat_mat, decoder_mqa_interleaved: 8 of 8
    # tests, torch 2.13.0; right with a fresh cache; measured). Unless the user chose a cache, each capability has its
    # own under Inductor's default one.
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    # Inductor's import (shared.py's torch.compiler.disable) set the variable to its default, if no one had.
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR", default_cache_dir()) == default_cache_dir():
        capability = torch.backends.cpu.get_cpu_capability().lower()
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(default_cache_dir(), capability)


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings():
        for note in _COMPILER_NOTES:
            warnings.filterwarnings("ignore", message=note)
        yield
