"""A multi-rank cell: its ranks under torchrun, kept in step, and their figures together."""
