"""What each input of a spec case may be on its own, checked when the spec loads so that a bad value never reaches an
adapter: each scalar's range, a generated tensor's rule and limits, cumulative lengths. What an op asks of its inputs
together is input_rules.py's."""

import functools

from attention_conformance.cases import yaml_values
from attention_conformance.contract.ops import CHOICES

GENERATED = {"fill": {"fill", "shape"}, "uniform": {"uniform", "shape", "seed"}}
MAX_ELEMENTS = 1 << 24  # a generated tensor; GPT-2 small's largest input is 1024 x 768
MAX_TOKENS = 4096  # a packed row's tokens: cu_seqlens' last value
MAX_SEED = 2**31 - 1  # every framework's seed type holds it (JAX keys and TF seeds are 32/64-bit)


# scalar input -> (valid?, what is valid), checked at load time so a bad value never reaches an adapter
SCALARS = {
    "d_in": (functools.partial(yaml_values.is_int, low=1, high=4096), "an integer in 1..4096"),
    "d_out": (functools.partial(yaml_values.is_int, low=1, high=4096), "an integer in 1..4096"),
    "num_heads": (
        functools.partial(yaml_values.is_int, low=1, high=64),
        "an integer in 1..64 that divides the projection width",
    ),
    "num_kv_heads": (
        functools.partial(yaml_values.is_int, low=1, high=64),
        "an integer in 1..64 that divides num_heads",
    ),
    "seed": (functools.partial(yaml_values.is_int, low=0, high=MAX_SEED), f"an integer in 0..{MAX_SEED}"),
    "start": (functools.partial(yaml_values.is_int, low=0, high=4095), "an integer in 0..4095, below the token count"),
    "window": (
        functools.partial(yaml_values.is_int, low=1, high=1_000_000),
        "an integer in 1..1000000 (keys a query sees)",
    ),
    "chunk": (
        functools.partial(yaml_values.is_int, low=0, high=1_000_000),
        "an integer in 0..1000000 (tokens a chunk holds; llama4_attention's 0: no chunks)",
    ),
    "floor_scale": (
        functools.partial(yaml_values.is_int, low=1, high=1_000_000),
        "an integer in 1..1000000 (positions a temperature step takes; Llama 4's 8192)",
    ),
    "attn_scale": (
        lambda v: yaml_values.is_number(v) and 0 <= v <= 10,
        "a number in 0..10 (the temperature's slope; Llama 4's 0.1, 0: none)",
    ),
    "use_rope": (lambda v: isinstance(v, bool), "true or false"),
    "left": (
        functools.partial(yaml_values.is_int, low=-1, high=1_000_000),
        "an integer in -1..1000000 (keys a query sees before its own; -1: all of them)",
    ),
    "right": (
        functools.partial(yaml_values.is_int, low=-1, high=1_000_000),
        "an integer in -1..1000000 (keys a query sees after its own; -1: all of them)",
    ),
    "rotary_dim": (
        lambda v: yaml_values.is_int(v, low=2, high=4096) and v % 2 == 0,
        "an even integer in 2..4096, at most a head's width",
    ),
    "theta": (lambda v: yaml_values.is_number(v) and 1 < v <= 1e9, "a number in (1, 1e9], RoPE's base"),
    "factor": (lambda v: yaml_values.is_number(v) and 1 <= v <= 1000, "a number in 1..1000"),
    "position": (
        functools.partial(yaml_values.is_int, low=0, high=500_000),
        "an integer in 0..500000 (the first row's position)",
    ),
    "original_max_positions": (
        functools.partial(yaml_values.is_int, low=1, high=500_000),
        "an integer in 1..500000 (the length the model was trained on)",
    ),
    "length": (
        functools.partial(yaml_values.is_int, low=1, high=500_001),
        "an integer in 1..500001 (a last position + 1)",
    ),
    "beta_fast": (lambda v: yaml_values.is_number(v) and 1 <= v <= 1000, "a number in 1..1000 (rotations)"),
    "beta_slow": (lambda v: yaml_values.is_number(v) and 1 <= v <= 1000, "a number in 1..1000 (rotations)"),
    "truncate": (lambda v: isinstance(v, bool), "true or false"),
    "cap": (lambda v: yaml_values.is_number(v) and 0 <= v <= 10_000, "a number in 0..10000 (0: no cap)"),
    "softmax_scale": (lambda v: yaml_values.is_number(v) and 0 < v <= 10_000, "a number in (0, 10000]"),
    "n": (functools.partial(yaml_values.is_int, low=1, high=10_000_000), "an integer in 1..10000000"),
    "d_k": (lambda v: yaml_values.is_number(v) and v > 0, "a number > 0"),
    "p": (lambda v: yaml_values.is_number(v) and 0 <= v < 1, "a probability, 0 <= p < 1"),
    "lr": (lambda v: yaml_values.is_number(v) and 0 < v <= 1, "a learning rate, 0 < lr <= 1"),
    "causal": (lambda v: isinstance(v, bool), "true or false"),
    "per_head": (lambda v: isinstance(v, bool), "true or false"),
    "eps": (lambda v: yaml_values.is_number(v) and 0 < v <= 1, "a number in (0, 1], a norm's epsilon"),
    "bidirectional": (lambda v: isinstance(v, bool), "true or false"),
    "query_length": (functools.partial(yaml_values.is_int, low=1, high=4096), "an integer in 1..4096"),
    "key_length": (functools.partial(yaml_values.is_int, low=1, high=4096), "an integer in 1..4096"),
    "num_buckets": (
        lambda v: yaml_values.is_int(v, low=4, high=1024) and v % 4 == 0,
        "a multiple of 4 in 4..1024 (T5 halves it for each sign, then halves that for the exact buckets)",
    ),
    "max_distance": (
        functools.partial(yaml_values.is_int, low=2, high=1_000_000),
        "an integer in 2..1000000, past the exact buckets",
    ),
    **{
        name: (lambda v, words=words: isinstance(v, str) and v in words, f"one of {', '.join(words)}")
        for name, words in CHOICES.items()
    },
}


def offsets(value):
    """Cumulative lengths as flash-attn's cu_seqlens: 0, then each document's end, increasing (no empty document)."""
    return (
        isinstance(value, list)
        and len(value) >= 2
        and all(yaml_values.is_int(v, high=MAX_TOKENS) for v in value)
        and value[0] == 0
        and all(a < b for a, b in zip(value, value[1:]))
    )
