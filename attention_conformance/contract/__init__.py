"""The contract: what an adapter defines (the op table), the test ids and declaration patterns it is
known by, and the registry that finds, imports and checks one. Imports only the leaves."""
