"""A sweep: the sweep file checked into a plan of cells, each cell run in a process of its own, the
run directory that holds their results, progress, resume and the dry-run estimate."""
