"""The commands beside a run: preflight (check), fuzz, the model sweep, explain and its examples,
the emulation of other machines (portability) and the benchmark."""
