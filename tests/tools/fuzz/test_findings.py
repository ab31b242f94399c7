"""fuzz's findings (attention_conformance/tools/fuzz/findings.py): a finding is written as a spec case the loader
accepts and as a reproducer that needs only NumPy and the adapter's own code, which exits 1 while the bug is there
and 0 once it is fixed."""

import subprocess
import sys
import textwrap

import yaml

from attention_conformance.cases import loader
from attention_conformance.paths import SPEC_DIR
from attention_conformance.tools.fuzz import findings, search

WRONG = textwrap.dedent(
    """
    import numpy as np

    DTYPES = ("float32",)


    def softmax(scores):
        s = np.asarray(scores, dtype=np.float64)
        e = np.exp(s - s.max(axis=0, keepdims=True))  # the wrong axis
        return (e / e.sum(axis=0, keepdims=True)).astype(np.float32)
    """
)


def _written(tmp_path, monkeypatch, source):
    (tmp_path / "wrong_axis.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    import wrong_axis

    fuzzer = search.Fuzzer("wrong_axis", wrong_axis, "float32", ["softmax"])
    finding = fuzzer.run(40, seed=0)
    assert finding is not None
    return findings.write(fuzzer, finding, tmp_path / "out", "wrong_axis", 0)


def test_the_case_is_one_the_spec_accepts(tmp_path, monkeypatch):
    case_id, yaml_path, _ = _written(tmp_path, monkeypatch, WRONG)
    (case,) = yaml.safe_load(yaml_path.read_text())
    assert case["id"] == case_id and case["op"] == "softmax"
    spec = yaml.safe_load((SPEC_DIR / "attention.yaml").read_text())
    spec["cases"].append(case)
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    assert case_id in loader.load_file(tmp_path / "spec.yaml").cases


def test_the_reproducer_stands_alone_and_exits_1_while_the_bug_is_there(tmp_path, monkeypatch):
    _, _, script = _written(tmp_path, monkeypatch, WRONG)
    assert not findings.imports_adapter(script)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run([sys.executable, str(script)], cwd=elsewhere, capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    fixed = script.read_text().replace("s.max(axis=0, keepdims=True)", "s.max(axis=-1, keepdims=True)")
    fixed = fixed.replace("e.sum(axis=0, keepdims=True)", "e.sum(axis=-1, keepdims=True)")
    script.write_text(fixed)
    done = subprocess.run([sys.executable, str(script)], cwd=elsewhere, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_code_the_adapter_imports_from_its_own_folder_is_copied_into_the_reproducer(tmp_path, monkeypatch):
    # An outside trial's flash-attention adapter imported attention_ref from flash_ref.py beside it, and its reproducer,
    # "needing only the framework and NumPy", stopped on that import with exit 1, the code that means "reproduced".
    (tmp_path / "wrong_axis_helper.py").write_text(WRONG.replace("def softmax(", "def wrong_softmax("))
    for name in ("wrong_axis", "wrong_axis_helper"):  # imported afresh, from this test's folder
        monkeypatch.delitem(sys.modules, name, raising=False)
    _, _, script = _written(
        tmp_path, monkeypatch, "from wrong_axis_helper import wrong_softmax as softmax\nDTYPES = ('float32',)\n"
    )
    assert not findings.imports_adapter(script) and "def wrong_softmax(" in script.read_text()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run([sys.executable, str(script)], cwd=elsewhere, capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "REPRODUCED" in done.stdout, done.stdout + done.stderr


TWO_MODES = textwrap.dedent(
    """
    import numpy as np

    DTYPES = ("float32",)
    MODES = {"eager": "as written", "compiled": "a compiler that sums the wrong axis"}


    def softmax(scores):
        s = np.asarray(scores, dtype=np.float64)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


    def in_mode(mode, op):
        def wrong_axis(scores):
            s = np.asarray(scores, dtype=np.float64)
            e = np.exp(s - s.max(axis=0, keepdims=True))
            return (e / e.sum(axis=0, keepdims=True)).astype(np.float32)

        return op if mode == "eager" else wrong_axis
    """
)


def test_a_finding_in_another_mode_reproduces_through_in_mode_where_the_op_itself_conforms(tmp_path, monkeypatch):
    from attention_conformance.contract import registry

    (tmp_path / "fuzz_two_modes.py").write_text(TWO_MODES)
    monkeypatch.syspath_prepend(str(tmp_path))
    import fuzz_two_modes

    compiled = registry.in_mode(fuzz_two_modes, "fuzz_two_modes", "compiled")  # the column, as registry.load makes it
    fuzzer = search.Fuzzer("fuzz_two_modes-compiled", compiled, "float32", ["softmax"])
    finding = fuzzer.run(40, seed=0)
    assert finding is not None
    _, _, script = findings.write(fuzzer, finding, tmp_path / "out", "fuzz_two_modes-compiled", 0)
    assert findings.imports_adapter(script)  # the compiled op is made at run time: never lifted out as eager's
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "REPRODUCED" in done.stdout, done.stdout + done.stderr


CALLABLE_OBJECT = textwrap.dedent(
    """
    import numpy as np

    DTYPES = ["float32"]
    NOT_APPLICABLE = {"*": "a test adapter of one op"}


    class _Kernel:  # transformers' hub-kernel functions are objects like this one: no __name__
        def __call__(self, s):
            e = np.exp(s - s.max(axis=0, keepdims=True))
            return e / e.sum(axis=0, keepdims=True)


    kernel = _Kernel()


    def softmax(scores):
        return kernel(np.asarray(scores, dtype=np.float64)).astype(np.float32)
    """
)


def test_a_callable_object_in_the_adapter_gives_a_reproducer_that_imports_it(tmp_path, monkeypatch):
    """An outside trial's adapter called transformers' apply_rotary_pos_emb, an object without __name__: writing the
    reproducer raised AttributeError instead of falling back to importing the adapter."""
    (tmp_path / "fuzz_callable_object.py").write_text(CALLABLE_OBJECT)
    monkeypatch.syspath_prepend(str(tmp_path))
    import fuzz_callable_object

    fuzzer = search.Fuzzer("fuzz_callable_object", fuzz_callable_object, "float32", ["softmax"])
    finding = fuzzer.run(40, seed=0)
    assert finding is not None
    _, _, script = findings.write(fuzzer, finding, tmp_path / "out", "fuzz_callable_object", 0)
    assert findings.imports_adapter(script)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "REPRODUCED" in done.stdout, done.stdout + done.stderr
