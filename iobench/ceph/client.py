"""librados for any CPython that matches Debian's: ``import_rados()``.

No ``rados`` wheel exists on PyPI; Debian's python3-rados ships one extension module,
``/usr/lib/python3/dist-packages/rados.cpython-311-x86_64-linux-gnu.so``, importable as is only
from the system ``python3``. A venv or pyenv interpreter of the *same* CPython minor version can
load that one file (it needs only librados2) without putting the rest of dist-packages (Debian's
requests, urllib3, ...) on ``sys.path``.
"""

from __future__ import annotations

import glob
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

DIST_PACKAGES = Path("/usr/lib/python3/dist-packages")


def _hint(detail: str) -> str:
    return (
        f"cannot import librados' Python binding ('rados'): {detail}. It comes from Debian's "
        "python3-rados (`apt-get install -y --no-install-recommends python3-rados`), built only for "
        "the CPython version of the system python3; run iobench with that version (for example "
        "/usr/bin/python3, or a venv made from it), or with a pyenv/venv interpreter of the same "
        "major.minor version."
    )


def import_rados(dist_packages: str | Path = DIST_PACKAGES) -> ModuleType:
    """Return the ``rados`` module: a normal import, else Debian's .so for this CPython version."""
    if sys.modules.get("rados") is not None:
        return sys.modules["rados"]
    try:
        return importlib.import_module("rados")
    except ImportError:
        pass
    tag = f"cpython-{sys.version_info.major}{sys.version_info.minor}"
    found = sorted(glob.glob(str(Path(dist_packages) / f"rados.{tag}-*.so")))
    if not found:
        others = sorted(Path(p).name for p in glob.glob(str(Path(dist_packages) / "rados.*.so")))
        detail = (
            f"{dist_packages} has only {', '.join(others)}, none for this interpreter ({tag})"
            if others
            else f"no rados.{tag}-*.so in {dist_packages}"
        )
        raise ImportError(_hint(detail), name="rados")
    spec = importlib.util.spec_from_file_location("rados", found[0])
    if spec is None or spec.loader is None:
        raise ImportError(_hint(f"{found[0]} is not loadable"), name="rados")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as e:  # e.g. librados2 missing or a different ABI
        raise ImportError(_hint(f"loading {found[0]} failed: {e}"), name="rados") from e
    sys.modules["rados"] = module
    return module
