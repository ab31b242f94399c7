"""The oracle is tested too: its analytic gradients against central finite differences in float64."""

import numpy as np
import pytest

from attention_conformance.adapters import reference
from attention_conformance.cases.golden import Goldens

EPS = 1e-6  # central differences: truncation ~EPS^2, rounding ~1e-16 / EPS; both near 1e-10 here


def _loss(x, w_query, w_key, w_value, g):
    return float((reference.attention(x, w_query, w_key, w_value)["context"] * g).sum())


def _finite_differences(args, index, g):
    grad = np.zeros_like(args[index])
    for position in np.ndindex(grad.shape):
        up, down = [a.copy() for a in args], [a.copy() for a in args]
        up[index][position] += EPS
        down[index][position] -= EPS
        grad[position] = (_loss(*up, g) - _loss(*down, g)) / (2 * EPS)
    return grad


@pytest.mark.parametrize("golden_file", ["doc000_seed123.json", "batched_cube.json"])
def test_analytic_gradients_match_finite_differences(golden_file):
    data = Goldens().file(golden_file)
    args = [data[name].astype(np.float64) for name in ("x", "w_query", "w_key", "w_value")]
    g = data["g"].astype(np.float64)
    analytic = reference.gradients(*args, g, "v1")
    for index, name in ((1, "grad_w_query"), (2, "grad_w_key"), (3, "grad_w_value"), (0, "grad_x")):
        numeric = _finite_differences(args, index, g)
        assert np.abs(analytic[name] - numeric).max() < 1e-8, name


def test_v2_gradients_are_v1_gradients_in_linear_layout():
    data = Goldens().file("doc000_seed789_v2.json")
    weights = [data[w].astype(np.float64) for w in ("w_query", "w_key", "w_value")]
    v2 = reference.gradients(data["x"], *weights, data["g"], "v2")
    v1 = reference.gradients(data["x"], *(w.T for w in weights), data["g"], "v1")
    for name in ("grad_w_query", "grad_w_key", "grad_w_value"):
        assert np.array_equal(v2[name], v1[name].T)
    assert np.array_equal(v2["grad_x"], v1["grad_x"])


def test_sgd_step_moves_against_the_gradient_and_lowers_the_loss():
    data = Goldens().file("doc000_seed123.json")
    weights = [data[w].astype(np.float64) for w in ("w_query", "w_key", "w_value")]
    stepped = reference.sgd_step(data["x"], *weights, data["g"], 0.1)
    grads = reference.gradients(data["x"], *weights, data["g"], "v1")
    for w, name in zip(weights, ("query", "key", "value")):
        assert np.allclose(stepped[f"w_{name}"], w - 0.1 * grads[f"grad_w_{name}"], rtol=0, atol=1e-15)
    assert _loss(data["x"], *stepped.values(), data["g"]) < _loss(data["x"], *weights, data["g"])


def test_softmax_rows_sum_to_one_and_survive_huge_scores():
    scores = np.array([[1000.0, -1000.0, 999.0], [0.0, 0.0, 0.0]])
    weights = reference.softmax(scores)
    assert np.all(np.isfinite(weights))
    assert np.allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-15)
    assert np.allclose(weights[1], 1 / 3, rtol=0, atol=1e-16)
