"""Run directories: the schema, the store that writes them, and the API that reads them back."""

from .api import load_run, load_runs, load_steps, to_pandas

__all__ = ["load_run", "load_runs", "load_steps", "to_pandas"]
