"""The ranks of a multi-rank cell: who a rank is, the process group, keeping step, the all-reduce."""
