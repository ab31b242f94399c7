"""The oracle: scaled dot-product self-attention in float64 NumPy, line by line after the math.

Shape letters: T query tokens, S key tokens (T == S in self-attention), B batch,
D d_in, H d_out (= d_k). Leading batch axes are optional everywhere.
Golden expected values are computed by this package, so it must stay the plainest possible
statement of the math: no framework, no fused path, no shortcut. Every product, sum and
exponential goes through attention_conformance.deterministic (`mm`, `fsum`, `exp` in shared.py), so its
answers are the same bytes on every CPU, BLAS kernel and thread count. Two things are there for
speed alone, each giving the bytes the plain statement gives (tests/run/test_oracle_cache.py): masked
heads computed in blocks of queries (_masked_head), and an answer computed once given again
(attention_conformance.remembered). One module per family, as the built-in adapters: `attention-conformance
template reference` prints it as one file.
"""

import numpy as np

from .bands import *
from .chunks import *
from .cross import *
from .cross import _t5_ties
from .documents import *
from .heads import *
from .heads import _future, _masked_head, _masked_softmax
from .layers import *
from .logits import *
from .norms import *
from .rope_scaling import *
from .rotary import *
from .shared import _f64, _zeros, exp, fsum, mm, rounding_to, tanh
from .varlen import *

DTYPES = ("float64",)
NOT_APPLICABLE = {
    "float16": "the oracle computes in float64 only",
    "bfloat16": "the oracle computes in float64 only",
}


def version():
    return f"numpy {np.__version__}"


def deciding_inputs(op, inputs):
    """The inputs that decide this oracle's answer to `op` (the oracle cache's key): for attention_module, not the
    checkpoint's layout (the weights arrive in the reference form) nor the layer, except that "mha_averaged" averages
    the weights. The GPT-2-shaped layer through GPT-2's block and through the mha layer is then computed once (1.3 s on
    an empty cache)."""
    if op == "attention_module":
        return inputs | {
            "checkpoint": "reference",
            "layer": "mha_averaged" if inputs["layer"] == "mha_averaged" else "mha",
        }
    return inputs
