"""The prep ceiling over a RAM copy of the dataset: readers more than shards split each shard by its
index, so the copy carries the indexes too."""

from __future__ import annotations

import pytest

from iobench.cell.diagnosis.ceilings import prep_ceiling
from iobench.cell.inputs import loader_inputs
from iobench.datasets.synth import synthesize
from iobench.results.spec import LoaderSettings, RunSettings
from iobench.tiers import make_tier

pytestmark = pytest.mark.slow  # a loader of two workers over the copy for its 3 s: about 6 s


def test_two_readers_over_one_shard_measure_the_prep_ceiling(tmp_path):
    manifest = synthesize(tmp_path, samples=48, seed=5, shard_bytes=10**9)
    assert len(manifest.shards) == 1
    tier = make_tier({"kind": "local", "path": str(tmp_path)})
    loader = LoaderSettings(kind="torch", workers=2, batch_size=8)
    items, source = loader_inputs(tier, tier.load_manifest(), loader)
    sizes = [(s.bytes, s.samples) for s in manifest.shards]
    ceiling = prep_ceiling(items, source, loader, RunSettings(), sizes=sizes)
    assert ceiling.samples > 0 and ceiling.samples_per_s > 0
    assert ceiling.samples % 8 == 0 and "1 shards" in ceiling.method
