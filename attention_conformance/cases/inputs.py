"""A case's inputs as the adapter receives them: spec values, golden tensors and generated tensors."""

import functools

import numpy as np

from attention_conformance.contract.ops import PARAMETERS
from attention_conformance.dtypes import np_dtype


def resolve(value, dtype, goldens):
    """An input as the adapter receives it. Tensor data is float32, as the documents' tensors are
    (golden inputs are stored so), then cast to the dtype under test: every dtype sees the same numbers."""
    if isinstance(value, str) and "#" in value:
        data = goldens.tensor(value)
    elif isinstance(value, dict) and "fill" in value:
        data = np.full(value["shape"], value["fill"])
    elif isinstance(value, dict):  # PCG64 streams are stable across NumPy versions and machines
        data = generated(value["seed"], *value["uniform"], tuple(value["shape"]))
    elif isinstance(value, list) and np.asarray(value).dtype == bool:
        return np.asarray(value)
    elif isinstance(value, (int, float, str, bool)):
        return value  # sizes, seeds, d_k, the learning rate and switches stay Python scalars; 'v1' stays a word
    else:
        data = np.array(value)
    return np.asarray(data, dtype=np.float32).astype(np_dtype(dtype))


def resolve_all(case, dtype, goldens):
    """{parameter: input} for one case in one dtype."""
    return {name: resolve_named(name, value, dtype, goldens) for name, value in case.inputs.items()}


def resolve_named(name, value, dtype, goldens):
    """resolve() for parameter `name`: cumulative lengths stay integers, int64 as flash-attn's cu_seqlens and
    torch's offsets take them, whatever the dtype under test."""
    if PARAMETERS.get(name) == "offsets":
        return np.asarray(value, dtype=np.int64)
    return resolve(value, dtype, goldens)


@functools.lru_cache(maxsize=16)
def generated(seed, low, high, shape):
    """A generated input, drawn once: GPT-2-shaped inputs are 3.2 million draws, wanted by every
    dtype, the adapter and the oracle. Read-only, so no caller can change the next one's copy."""
    data = np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)
    data.flags.writeable = False
    return data
