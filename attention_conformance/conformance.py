"""The spec as tests: one test function per output the contract names, generated here, parametrized
by the plugin from the plan, with ids `test_<output>[<adapter>-<dtype>-<case>]`."""

from attention_conformance.contract.ops import OUTPUTS


def _test_of(output):
    def test(conformance_test):
        __tracebackhide__ = True
        conformance_test()

    test.__name__ = test.__qualname__ = f"test_{output}"
    test.conformance_output = output
    return test


for _output in OUTPUTS:
    globals()[f"test_{_output}"] = _test_of(_output)
