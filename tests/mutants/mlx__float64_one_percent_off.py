"""Every float64 result of five ops 1% too large, where MLX declares float64 computed at float32's accuracy: the
declaration (spec/divergences/mlx.yaml, kind precision) judges those tests at float32's allowance, about 1e-7 of the
values, and 1% is some 10^5 times that. Issue 71's scratch adapter: with the tests excused, it passed them all."""

import inspect

import numpy as np

from attention_conformance.adapters import mlx
from attention_conformance.adapters.mlx import *

EXPECTED = "caught"
RUN_IN = ("float64",)
MUST_FAIL = ("window_three", "paths_chunk_61", "softcap_causal", "alibi_three_heads", "sink_dominant")


def _too_large(fn):
    def wrapped(*args, **kwargs):
        found = fn(*args, **kwargs)
        items = found.items() if isinstance(found, dict) else [(None, found)]
        out = {k: v * 1.01 if isinstance(v, np.ndarray) and v.dtype == np.float64 else v for k, v in items}
        return out if isinstance(found, dict) else out[None]

    wrapped.__signature__ = inspect.signature(fn)  # the contract check reads parameter names
    return wrapped


window_attention = _too_large(mlx.window_attention)
decode_paths = _too_large(mlx.decode_paths)
softcap_attention = _too_large(mlx.softcap_attention)
alibi_attention = _too_large(mlx.alibi_attention)
sink_attention = _too_large(mlx.sink_attention)
