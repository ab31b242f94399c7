"""`attention-conformance fuzz`: generated cases over the contract's forward ops, judged by the tolerance model
(docs/fuzz.md). command.py is the command; cases.py draws, search.py judges and shrinks, findings.py writes."""
