"""The built-in adapters, one file per framework: NumPy arrays in and out, the framework's own code, and of the
suite only its public API (docs/contract.md, "What an adapter may import": `ports`, `cache`,
`known_divergences`, another built-in adapter; the oracle, reference.py, also computes with `deterministic` and
`bounds`), which tests/test_layers.py holds them to. Their known divergences are data, in spec/divergences/.
Installed as `attention_conformance.adapters`; the contract is attention_conformance/contract/ops.py.
"""
