"""Scraping a Prometheus endpoint in tests, and the metric names docs/monitoring.md defines."""

from __future__ import annotations

import re
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.paths import ROOT

DOC = ROOT / "docs" / "monitoring.md"


class Scrape:
    """One scrape, parsed: every sample by (name, labels)."""

    def __init__(self, text: str) -> None:
        self.families = list(text_string_to_metric_families(text))
        self.samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value for f in self.families for s in f.samples
        }

    @classmethod
    def of(cls, port: int) -> Scrape:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            return cls(response.read().decode())

    def value(self, name: str, **labels: str) -> float:
        """The one sample called ``name`` whose labels include ``labels``."""
        found = [v for (n, lab), v in self.samples.items() if n == name and set(labels.items()) <= set(lab)]
        assert len(found) == 1, f"{name}{labels}: {len(found)} samples in the scrape"
        return found[0]

    def labels_of(self, name: str) -> list[dict[str, str]]:
        return [dict(lab) for n, lab in self.samples if n == name]

    def names(self) -> set[str]:
        """Metric names as exposed and documented: a histogram by its family name, else by sample
        name (counters with _total, info metrics with _info)."""
        out = set()
        for f in self.families:
            if f.type == "histogram":
                out |= {f.name} if f.samples else set()
            else:
                out |= {s.name for s in f.samples if not s.name.endswith("_created")}
        return out

    def counters(self) -> dict[tuple, float]:
        """Every counter and histogram sample: what must never decrease between two scrapes."""
        kinds = {f.name: f.type for f in self.families}
        return {
            key: v
            for key, v in self.samples.items()
            if kinds.get(_family(key[0])) in ("counter", "histogram") and not key[0].endswith("_created")
        }


def _family(sample: str) -> str:
    return re.sub(r"_(total|bucket|count|sum)$", "", sample)


def documented(prefix: str) -> set[str]:
    """The metric names in docs/monitoring.md's tables that start with ``prefix``."""
    return set(re.findall(rf"^\| `({prefix}[a-z_]*)`", DOC.read_text(), flags=re.M))


def assert_never_decrease(before: Scrape, after: Scrape) -> None:
    """Counters only grow between two scrapes, and none disappears."""
    old, new = before.counters(), after.counters()
    assert set(old) <= set(new)
    went_down = {k: (old[k], new[k]) for k in old if new[k] < old[k]}
    assert not went_down
