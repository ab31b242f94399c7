"""What the reports become: the summary table, the matrix, the page, and the tables the docs carry."""
