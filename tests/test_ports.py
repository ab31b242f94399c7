"""The weight-porting conversions (attention_conformance/ports.py): exact, every layout, every pair.

The frameworks' environments check that each layer, loaded through these conversions, computes the
reference (the layer_ cases); here, without any framework, that the conversions themselves lose
nothing and that a wrong checkpoint is refused with a message that names the parameter.
"""

import itertools

import numpy as np
import pytest

from attention_conformance import ports

SHAPES = [(8, 2), (12, 3), (6, 6), (5, 1)]  # (E, N): head_dim != N, head_dim == 1, one head


def _weights(E, seed=0):
    rng = np.random.default_rng(seed)
    return {
        name: rng.uniform(-1, 1, (E, E) if name.startswith("w_") else (E,)).astype(np.float32)
        for name in ports.REFERENCE
    }


def _same(a, b):
    assert sorted(a) == sorted(b)
    for key in a:
        assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape and np.array_equal(a[key], b[key]), key


@pytest.mark.parametrize("E,N", SHAPES)
@pytest.mark.parametrize("layout", ports.LAYOUTS)
def test_a_round_trip_through_any_layout_is_the_identity(layout, E, N):
    weights = _weights(E)
    saved = ports.to_layout(layout, weights, N)
    assert {k: v.shape for k, v in saved.items()} == ports.layout_shapes(layout, E, N)
    _same(ports.from_layout(layout, saved, N), weights)


@pytest.mark.parametrize("source,target", list(itertools.permutations(ports.LAYOUTS[1:], 2)))
def test_porting_between_every_pair_is_what_the_target_would_have_saved(source, target):
    weights = _weights(8, seed=1)
    _same(ports.port(ports.to_layout(source, weights, 2), source, target, 2), ports.to_layout(target, weights, 2))
    _same(ports.as_saved_by(source, weights, target, 2), ports.to_layout(target, weights, 2))


def test_the_layouts_place_each_number_where_the_frameworks_do():
    """Spot checks written from each framework's documented layout, independent of ports.py's code."""
    E, N, hd = 8, 2, 4
    w = _weights(E, seed=2)
    torch = ports.to_layout("torch", w, N)
    assert torch["in_proj_weight"][E + 3, 5] == w["w_key"][5, 3]  # rows E:2E are W_k, nn.Linear's [out, in]
    assert torch["out_proj.weight"][1, 6] == w["w_out"][6, 1]
    keras = ports.to_layout("keras", w, N)
    assert keras["value/kernel"][7, 1, 2] == w["w_value"][7, 1 * hd + 2]  # [E, N, head_dim]: head 1, feature 2
    assert keras["query/bias"][1, 0] == w["b_query"][hd]
    assert keras["attention_output/kernel"][1, 3, 0] == w["w_out"][1 * hd + 3, 0]  # [N, head_dim, E]
    assert ports.to_layout("flax", w, N)["out/kernel"][0, 2, 5] == w["w_out"][2, 5]
    gpt2 = ports.to_layout("gpt2", w, N)
    assert gpt2["c_attn.weight"][4, 2 * E + 1] == w["w_value"][4, 1]  # columns 2E:3E are W_v, input-major
    assert gpt2["c_attn.bias"][E] == w["b_key"][0]
    assert gpt2["c_proj.weight"][2, 5] == w["w_out"][2, 5]  # Conv1D keeps x @ W: no transpose


def test_an_ops_eight_arguments_are_the_reference_form_as_given():
    w = _weights(8, seed=3)
    weights = ports.reference_weights(*(w[name] for name in ports.REFERENCE))
    assert list(weights) == list(ports.REFERENCE)
    assert all(weights[name] is w[name] for name in ports.REFERENCE)  # not copied, not converted: the dtype an op got
    _same(ports.from_layout("torch", ports.to_layout("torch", w, 2), 2), weights)


@pytest.mark.parametrize("own", ["torch", "keras", "flax"])
def test_gpt2s_block_holds_gpt2s_layout_and_every_other_layer_the_frameworks_own(own):
    assert ports.layer_layout("gpt2", own) == "gpt2"
    assert {ports.layer_layout(layer, own) for layer in ("mha", "mha_averaged", "mha_seq_first")} == {own}


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda c: c.pop("in_proj_bias"), "torch checkpoint: expected parameters"),
        (
            lambda c: c.update({"in_proj_weight": c["in_proj_weight"].T}),
            "torch checkpoint: 'in_proj_weight' has shape (8, 24), expected (24, 8)",
        ),
        (lambda c: c.update({"extra": np.zeros(1)}), "unexpected ['extra']"),
    ],
)
def test_a_wrong_checkpoint_is_refused_naming_the_parameter(mutate, message):
    checkpoint = ports.to_layout("torch", _weights(8), 2)
    mutate(checkpoint)
    with pytest.raises(ports.PortError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        ports.from_layout("torch", checkpoint, 2)


def test_unknown_layouts_and_heads_that_do_not_divide_are_refused():
    with pytest.raises(ports.PortError, match="unknown layout 'jax'"):
        ports.to_layout("jax", _weights(8), 2)
    with pytest.raises(ports.PortError, match="embed width 8 is not divisible by num_heads 3"):
        ports.to_layout("keras", _weights(8), 3)
    with pytest.raises(ports.PortError, match="keras checkpoint: parameter 'query/kernel' missing"):
        ports.from_layout("keras", {}, 2)


def test_importing_ports_imports_no_framework():
    import subprocess
    import sys

    code = (
        "import sys, attention_conformance.ports; "
        "print(sorted({'torch', 'tensorflow', 'jax', 'flax', 'keras'} & set(sys.modules)))"
    )
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
    )
