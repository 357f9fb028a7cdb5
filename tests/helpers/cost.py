"""A test's cost follows from the fixtures it uses, not from a mark written by hand.

``COSTS`` names the fixtures that start something expensive and the marks each brings; every test
using one (directly or through another fixture: ``item.fixturenames`` is the whole closure) gets
those marks at collection, before ``-m`` selects. So ``pytest -m "not slow"`` (the quick loop)
leaves out every test that starts the Ceph lab, a sweep's cells or torchrun, and no test can use one
and stay in it. Hand marks remain for costs no fixture carries (a cell run in-process, many epochs).

Folders say the same: a test under tests/unit/ that uses the lab is refused at collection (it
belongs in tests/integration/ or tests/reliability/).
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

COSTS: dict[str, tuple[str, ...]] = {
    # the session's Ceph lab, and the one tests may break (lab_to_break is built on it)
    "ceph_lab": ("integration", "slow"),
    "breakable_lab": ("integration", "slow"),
    "own_lab_dir": ("integration", "slow"),  # a lab the test starts itself
    # tests/helpers/processes.py: a sweep's cells (a torch process each), a script under torchrun
    "iobench_sweep": ("slow",),
    "torchrun": ("slow",),
}
MARKERS = {
    "integration": "needs a real service (the Ceph lab); never skipped silently in CI",
    "slow": "starts the lab, a sweep's cells or torchrun (by its fixtures), or runs long; "
    '`pytest -m "not slow"` is the quick loop',
}
SERVICES = frozenset(name for name, marks in COSTS.items() if "integration" in marks)


def marks_for(fixturenames: Iterable[str]) -> list[str]:
    """The marks a test using ``fixturenames`` carries, in a stable order."""
    names = set(fixturenames)
    return sorted({mark for fixture, marks in COSTS.items() if fixture in names for mark in marks})


def _in_unit(item: pytest.Item) -> bool:
    """Whether ``item`` is under a ``unit`` folder at the top of the tests (tests/unit/...)."""
    return "unit" in item.path.relative_to(item.config.rootpath).parts[:2]


def pytest_configure(config: pytest.Config) -> None:
    for name, meaning in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {meaning}")


@pytest.hookimpl(tryfirst=True)  # before -m deselects by these marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    misplaced = []
    for item in items:
        names = item.fixturenames
        for mark in marks_for(names):
            if item.get_closest_marker(mark) is None:
                item.add_marker(mark)
        if _in_unit(item) and SERVICES & set(names):
            misplaced.append(item.nodeid)
    if misplaced:
        raise pytest.UsageError(
            "tests under tests/unit/ use no services; move these to tests/integration/ (or "
            "tests/reliability/): " + ", ".join(misplaced)
        )
