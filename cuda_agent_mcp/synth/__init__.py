"""Task synthesis: compose reference programs from seed operators, filter them, write a dataset."""
