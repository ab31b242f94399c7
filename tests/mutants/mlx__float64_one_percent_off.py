"""Every float64 result of five ops 1% too large, where MLX declares float64 computed at float32's accuracy: the
declaration (spec/divergences/mlx.yaml, kind precision) judges those tests at float32's allowance, about 1e-7 of the
values, and 1% is some 10^5 times that. Issue 71's scratch adapter: with the tests excused, it passed them all."""

from attention_conformance.adapters import mlx
from attention_conformance.adapters.mlx import *
from tests.mutants._declared_cells import float64_one_percent_off as _too_large

EXPECTED = "caught"
RUN_IN = ("float64",)
MUST_FAIL = ("window_three", "paths_chunk_61", "softcap_causal", "alibi_three_heads", "sink_dominant")

window_attention = _too_large(mlx.window_attention)
decode_paths = _too_large(mlx.decode_paths)
softcap_attention = _too_large(mlx.softcap_attention)
alibi_attention = _too_large(mlx.alibi_attention)
sink_attention = _too_large(mlx.sink_attention)
