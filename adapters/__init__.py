"""The built-in adapters, one file per framework: NumPy arrays in and out, nothing imported from the
suite. Installed as `attention_conformance.adapters`; the contract is attention_conformance/contract/ops.py.
"""
