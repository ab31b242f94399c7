"""The spec against each requested adapter: one test function per output the spec checks.

Tests are generated in conftest.py from spec/attention.yaml; the ids read
`test_<output>[<adapter>-<dtype>-<case>]`, so `-k "torch and scores"` selects what it says.
A function here with no case in the spec collects nothing; tests/test_suite.py checks that
every output named in spec.QUANTITIES has its function.
"""


def test_query(check):
    check()


def test_key(check):
    check()


def test_value(check):
    check()


def test_scores(check):
    check()


def test_d_k(check):
    check()


def test_scaled(check):
    check()


def test_weights(check):
    check()


def test_context(check):
    check()


def test_context_no_grad(check):
    check()


def test_context_v2(check):
    check()


def test_projection(check):
    check()


def test_by_hand(check):
    check()


def test_parameter(check):
    check()


def test_trainable(check):
    check()


def test_count(check):
    check()


def test_grad_w_query(check):
    check()


def test_grad_w_key(check):
    check()


def test_grad_w_value(check):
    check()


def test_grad_x(check):
    check()


def test_w_query(check):
    check()


def test_w_key(check):
    check()


def test_w_value(check):
    check()


def test_heads(check):
    check()


def test_dropout_eval(check):
    check()


def test_dropout_train(check):
    check()


def test_sample(check):
    check()


def test_part6(check):
    check()


def test_part6_scaled(check):
    check()


def test_part7_identity(check):
    check()


def test_part7_identity_unscaled(check):
    check()
