"""The cell contract and the run directories that keep it: what a cell is (spec.py), what it
measured (figures.py, summary.py), the results table derived from that (schema.py), the store that
writes run directories (store.py) and the API that reads them back (api.py).

Imports nothing of iobench above host/: every other package may use these records.
"""

from .api import load_run, load_runs, load_steps, to_pandas

__all__ = ["load_run", "load_runs", "load_steps", "to_pandas"]
