"""A run: calling an adapter, the oracle and its cache, the tolerance model, verifying each test, and
the reports it leaves. Imports cases, the contract and the leaves."""
