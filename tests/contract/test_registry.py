"""The adapter registry (attention_conformance/contract/registry.py): where an adapter name leads, every way
a module breaks the contract said in one line each, the hint for a name that does not import, and loading
the built-in reference adapter.
"""

import inspect
import sys
import types

import pytest

from attention_conformance.contract import registry
from attention_conformance.contract.ops import CONTRACT, OPTIONAL


def _function(params):
    """A function whose signature is exactly `params`, as inspect reads it."""

    def fn(*args, **kwargs):
        return None

    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    fn.__signature__ = inspect.Signature([inspect.Parameter(p, kind) for p in params])
    return fn


def _adapter(**overrides):
    """A module that keeps the whole contract, but for `overrides` (None deletes a name)."""
    module = types.ModuleType("fake_adapter")
    module.DTYPES = ("float32",)
    for name, params in CONTRACT.items():
        setattr(module, name, _function(params))
    for name, value in overrides.items():
        if value is None:
            delattr(module, name)
        else:
            setattr(module, name, value)
    return module


def test_a_built_in_name_is_the_packaged_module_and_any_other_is_taken_as_written():
    assert registry.module_path("reference") == "attention_conformance.adapters.reference"
    assert set(registry.NAMES) >= {"reference", "torch"} and "_template" not in registry.NAMES
    assert registry.module_path("my_company.attention_adapter") == "my_company.attention_adapter"


def test_a_module_that_keeps_the_contract_has_no_problems():
    assert registry.contract_problems(_adapter()) == []
    assert registry.contract_problems(_adapter(**{op: None for op in OPTIONAL})) == []  # optional ops may go
    assert registry.contract_problems(types.SimpleNamespace(**vars(_adapter()))) == []


@pytest.mark.parametrize(
    "overrides,says",
    [
        ({"DTYPES": ("float32", "float8")}, "DTYPES must be a non-empty tuple"),
        ({"DTYPES": []}, "DTYPES must be a non-empty tuple"),
        ({"NOT_APPLICABLE": {"float16": ""}}, "NOT_APPLICABLE must map a key to the reason"),
        ({"NOT_APPLICABLE": {"layer=bert": "no BERT"}}, "NOT_APPLICABLE key 'layer=bert': layer takes mha"),
        ({"KNOWN_DIVERGENCES": {"Sat": "why"}}, "KNOWN_DIVERGENCES must map"),
        ({"pin_numerics": lambda flag: {}}, "pin_numerics must be a function of no arguments"),
        ({"softmax": None}, "missing function softmax(scores)"),
        ({"scale": _function(("scores", "dk"))}, "scale(scores, dk) should be scale(scores, d_k)"),
        ({"blend": _function(("v", "weights"))}, "blend(v, weights) should be blend(weights, v)"),  # order counts
        ({"version": "1.0"}, "missing function version()"),
    ],
)
def test_each_way_of_breaking_the_contract_is_one_line_that_names_it(overrides, says):
    problems = registry.contract_problems(_adapter(**overrides))
    assert len(problems) == 1 and says in problems[0], problems
    assert "\n" not in problems[0]


def test_star_declares_every_op_the_module_leaves_out_and_nothing_it_defines():
    """A newcomer's adapter is the functions it has and one line; a function left out without "*" or its own key
    is still a broken contract, so a misspelled name never turns into a skip."""
    module = _adapter(softmax=None, blend=None, NOT_APPLICABLE={"*": "not written yet", "blend": "no blend"})
    registry.declare_rest(module)
    assert module.NOT_APPLICABLE["softmax"] == "not written yet" and module.NOT_APPLICABLE["blend"] == "no blend"
    assert "*" not in module.NOT_APPLICABLE and "scale" not in module.NOT_APPLICABLE  # defined: it runs
    assert registry.contract_problems(module) == []
    assert registry.contract_problems(_adapter(blend=None, NOT_APPLICABLE={"blend": "no blend"})) == []
    assert registry.contract_problems(_adapter(version=None, NOT_APPLICABLE={"version": "x"})) == [
        "missing function version()"
    ]
    blank = _adapter(softmax=None, NOT_APPLICABLE={"*": " "})  # no reason: refused, not expanded
    registry.declare_rest(blank)
    assert "NOT_APPLICABLE must map a key to the reason" in registry.contract_problems(blank)[0]


@pytest.mark.parametrize("key", ["float16", "softmax", "attention_module/weights", "causal=true", "fill=neg_inf"])
def test_a_good_not_applicable_key_has_no_problem(key):
    assert registry.not_applicable_key_problem(key) is None


@pytest.mark.parametrize(
    "key,says",
    [
        ("layer=MHA", "in lower case: layer=mha"),
        ("softmax/context", "softmax() has no output 'context': its outputs are weights"),
        ("api=float", "api takes bool, additive, not 'float'"),
        ("Float16", "must be a dtype, an op or a case id"),
    ],
)
def test_a_wrong_not_applicable_key_says_what_to_write(key, says):
    assert says in (registry.not_applicable_key_problem(key) or ""), key


def test_a_misspelled_adapter_gets_the_nearest_name_and_a_file_name_its_module_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_adapter.py").write_text("")  # the user's own adapter, beside them
    assert registry.import_hint("refernce", ModuleNotFoundError(name="refernce")) == " (did you mean 'reference'?)"
    assert "'my_adapter'" in registry.import_hint("my_adaptr", ModuleNotFoundError(name="my_adaptr"))
    assert "give the module's name, 'my_adapter'" in registry.import_hint(
        "my_adapter.py", ModuleNotFoundError(name="my_adapter")
    )
    relative = TypeError("the 'package' argument is required to perform a relative import for './my_adapter.py'")
    assert "give the module's name, 'my_adapter'" in registry.import_hint("./my_adapter.py", relative)
    assert "built-in adapters: " in registry.import_hint("zzzz", ModuleNotFoundError(name="zzzz"))
    # A framework missing inside an adapter that exists is not a misspelled adapter name.
    assert registry.import_hint("torch", ModuleNotFoundError(name="torch._C")) == ""
    assert registry.import_hint("reference", ImportError("broken")) == ""


def test_the_reference_adapter_loads_and_pins_nothing():
    module = registry.load("reference")
    assert module.__name__ == "attention_conformance.adapters.reference"
    assert registry.contract_problems(module) == []
    assert registry.pin(module) == {}


def test_a_module_that_does_not_import_or_breaks_the_contract_is_refused_in_one_line(monkeypatch):
    with pytest.raises(registry.AdapterError, match=r"does not import: ModuleNotFoundError.*did you mean 'reference'"):
        registry.load("refernce")
    monkeypatch.setitem(sys.modules, "fake_adapter", _adapter(softmax=None))
    with pytest.raises(registry.AdapterError, match=r"'fake_adapter' breaks the contract: missing function softmax"):
        registry.load("fake_adapter")


def test_pin_sets_the_switches_again_each_time_it_is_called(monkeypatch):
    calls = []

    def pin_numerics():
        calls.append(1)
        return [("intra_op_threads", 1)]

    module = _adapter(pin_numerics=pin_numerics)
    monkeypatch.setitem(sys.modules, "fake_adapter", module)
    assert registry.load("fake_adapter").pin_numerics is pin_numerics and calls == [1]  # the module, as its mode
    assert registry.pin(module) == {"intra_op_threads": 1} and calls == [1, 1]


def test_modes_and_a_modes_own_not_applicable_keys_are_checked_in_one_line_each():
    def wrong(**overrides):
        return registry.contract_problems(_adapter(**overrides))

    assert wrong(MODES={"eager": "op by op", "compiled": "a compiler"}) == [
        "in_mode(mode, op) must return `op` as `mode` runs it, for an adapter with more than one mode"
    ]
    assert wrong(MODES={"fast": "a guess"}) == [
        "MODES names 'fast', which is not a mode: the modes are eager, compiled"
    ]
    assert "MODES must map each mode" in wrong(MODES={"eager": ""})[0]
    assert wrong(NOT_APPLICABLE={"jit": {"softmax": "why"}}) == [
        "NOT_APPLICABLE key 'jit' holds a map, which only a mode may: eager, compiled"
    ]
    two = {"MODES": {"eager": "op by op", "compiled": "a compiler"}, "in_mode": lambda mode, op: op}
    assert wrong(**two, NOT_APPLICABLE={"compiled": {"softmax": "the compiler refuses it"}}) == []
    assert wrong(**two, NOT_APPLICABLE={"compiled": {"Soft Max": "typo"}})[0].startswith(
        "NOT_APPLICABLE key 'Soft Max' (mode compiled): must be"
    )
    assert wrong(NOT_APPLICABLE={"compiled": {"softmax": "why"}}) == [
        "NOT_APPLICABLE names mode 'compiled', which MODES does not declare"
    ]


def test_a_column_is_the_adapter_through_in_mode_with_that_modes_keys_and_the_module_untouched(monkeypatch):
    calls = []

    def in_mode(mode, op):
        def run(*args, **kwargs):
            calls.append(mode)
            return op(*args, **kwargs)

        return run

    module = _adapter(
        MODES={"eager": "op by op", "compiled": "a compiler"},
        in_mode=in_mode,
        NOT_APPLICABLE={"float64": "float32 only", "compiled": {"softmax": "the compiler refuses it"}},
    )
    module.softmax = lambda scores: scores
    monkeypatch.setitem(sys.modules, "fake_adapter", module)
    eager, compiled = registry.load("fake_adapter"), registry.load("fake_adapter-compiled")
    assert (eager.MODE, compiled.MODE, compiled.ADAPTER) == ("eager", "compiled", "fake_adapter")
    assert eager.NOT_APPLICABLE == {"float64": "float32 only"}
    assert compiled.NOT_APPLICABLE == {"float64": "float32 only", "softmax": "the compiler refuses it"}
    assert eager.softmax(1) == 1 and calls == []
    assert compiled.softmax(2) == 2 and calls == ["compiled"]
    assert module.NOT_APPLICABLE["compiled"] and module.softmax(3) == 3 and calls == ["compiled"]
    with pytest.raises(registry.AdapterError, match="does not run mode 'eager'|does not run mode"):
        registry.load("reference-compiled")


def test_what_an_adapters_import_brought_in_is_named_by_distribution():
    assert registry._distributions({"yaml", "yaml.cyaml", "json", "_socket", "attention_conformance.plugin"}) == [
        f"PyYAML {__import__('yaml').__version__}"
    ]
    assert registry.brought_in("never_loaded_adapter_xyz") == "cannot tell (imported before this session)"


def test_a_fresh_import_records_what_it_brought_and_a_second_load_does_not_forget(tmp_path, monkeypatch):
    source = "\n".join(f"def {name}({', '.join(params)}): pass" for name, params in CONTRACT.items())
    (tmp_path / "brought_in_probe_adapter.py").write_text(
        "import colorsys\nDTYPES = ('float32',)\ndef version(): return 'probe 1'\n" + source + "\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.load("brought_in_probe_adapter")
    assert registry.brought_in("brought_in_probe_adapter") == "nothing new"  # the standard library is not counted
    registry.load("brought_in_probe_adapter")
    assert registry.brought_in("brought_in_probe_adapter") == "nothing new"
    sys.modules.pop("brought_in_probe_adapter", None)
