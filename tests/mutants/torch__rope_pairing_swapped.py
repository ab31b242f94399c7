"""Interleaved RoPE turning the pairs (i, i + R/2): a checkpoint of one layout run with the other's rotation, the
mix-up of mlx-examples#170 and of a Llama conversion done twice."""

import torch

from attention_conformance.adapters.torch import *
from attention_conformance.adapters.torch.rotary import _rotate
from attention_conformance.adapters.torch.shared import _np, _t

EXPECTED = "caught"
MUST_FAIL = ("rope_interleaved", "rope_partial_interleaved")


def rotary_embedding(x, pairing, rotary_dim, theta, position, scaling, factor):
    x = _t(x)
    positions = torch.arange(position, position + x.shape[-2])
    return _np(_rotate(x, positions, "rotate_half", rotary_dim, theta, scaling, factor))  # the bug: one pairing
