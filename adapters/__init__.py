"""The built-in adapters, one per framework: NumPy arrays in and out, the framework's own code, and of the suite
only its public API (docs/contract.md, "What an adapter may import": `ports`, `cache`, `known_divergences`,
another built-in adapter; the oracle, reference/, also `deterministic`, `bounds` and `remembered`), which
tests/test_layers.py holds them to. Their known divergences are data, in spec/divergences/.

An adapter is a file until it passes 450 lines, then a package of one module per group of families (reference/, torch/,
tensorflow/, jax/, mlx/, onnxruntime/): documents.py (the mapping table, the pipeline, the module forms,
initialisation, the knobs, training), heads.py (masks, decoding, dropout, several and grouped heads), layers.py
(the layers checkpoints are loaded into), shared.py (what they use), and the face, __init__.py (DTYPES,
NOT_APPLICABLE, version, pin_numerics, the ops it cannot run), which takes every family's ops.
Installed as `attention_conformance.adapters`; the contract is attention_conformance/contract/ops.py.
"""
