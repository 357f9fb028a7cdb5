"""Loaded by Python's ``site`` at the start of every process of a job ``iobench probe`` runs (this
directory is first on its PYTHONPATH): runs the sitecustomize it hides, if any, exactly as Python
would have, then loads the probe's hooks. A hook that fails to load leaves a note in the probe's
directory and the job runs as it would have, its output untouched."""

from __future__ import annotations

import os
import sys
import traceback

_HERE = os.path.dirname(os.path.realpath(__file__))


def _not_here(entry: str) -> bool:
    return os.path.realpath(entry or os.getcwd()) != _HERE


def _chain() -> None:
    """Import the next ``sitecustomize`` on the path, with Python's own message if it fails."""
    ours = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if _not_here(p)]
    try:
        import sitecustomize  # noqa: F401  (the job's own, or its interpreter's)
    except ImportError as exc:
        if exc.name != "sitecustomize":
            _say_as_site(exc)
    except Exception as exc:
        _say_as_site(exc)
    finally:
        sys.path[:] = saved
        if "sitecustomize" not in sys.modules and ours is not None:
            sys.modules["sitecustomize"] = ours


def _say_as_site(exc: BaseException) -> None:
    # what site.execsitecustomize prints when a sitecustomize fails
    if sys.flags.verbose:
        sys.excepthook(type(exc), exc, exc.__traceback__)
    else:
        sys.stderr.write(
            f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(exc).__name__}: {exc}\n"
        )


def _load_probe() -> None:
    directory = os.environ.get("IOBENCH_PROBE_DIR")
    if not directory:
        return
    try:
        import _iobench_probe

        _iobench_probe.install()
    except Exception:
        try:
            with open(os.path.join(directory, f"hook-error-{os.getpid()}.txt"), "w") as f:
                f.write(traceback.format_exc())
        except OSError:
            pass


_chain()
_load_probe()
