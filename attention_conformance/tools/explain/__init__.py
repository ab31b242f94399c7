"""`attention-conformance explain`: a user's own tensors judged by the tolerance model (docs/usage.md). command.py is
the command; problem.py reads and checks the file, forms.py its call forms, qk.py what turns q and k before their
product, stages.py the intermediates it gives, conventions.py the conventions tried where it fails."""
