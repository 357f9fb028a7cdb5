"""Where things are, for tests in any folder: the repository root and the test data."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
