"""The cases: the spec read and validated, its golden tensors and inputs, the known divergences, and
the plan of tests it defines for an adapter. Imports the contract and the leaves."""
