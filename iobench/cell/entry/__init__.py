"""A cell's entry points, one a process: the cell alone, or torchrun and one rank of its job."""
