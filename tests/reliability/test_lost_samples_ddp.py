"""The same faults under the drop-in loaders in a plain DDP training loop (examples/ddp_train.py under
torchrun, gloo, 2 ranks, one DataLoader worker each) reading the lab's radosgw: a damaged cache
entry is fetched again and the job trains on every sample; a shard damaged in the store fails the
job past the loss budget with an error naming the shard and what to do, and within a budget set
higher (the cache's directory read-only, so read around) trains on exactly the rest."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from iobench.datasets.manifest import Manifest
from iobench.tiers.s3 import S3Tier
from loaders.observe import LoaderCounters
from loaders.storage.shardcache import ShardCache
from tests.helpers.faultkit import stage_copy
from tests.helpers.processes import ddp_example
from tests.helpers.shardkit import key_label_pairs
from tests.reliability.test_lost_samples import (
    DAMAGED,
    REGION,
    _damage,
    _loader,
    _lost_keys,
    _overwrite,
)
from tests.reliability.test_resource_faults import mounted_tmpfs


@pytest.fixture(scope="module")
def shards(lab_env, tiny_dataset, tmp_path_factory):
    """A bucket whose shard DAMAGED was overwritten with zeros over REGION, a clean one, and the
    counts file both need (remote shards: the even split needs every count)."""
    manifest = Manifest.load(tiny_dataset)
    out = {}
    for what in ("clean", "damaged"):
        url = stage_copy(lab_env, tiny_dataset, f"ddp{what}")
        urls = S3Tier(url=url).shard_urls(manifest)
        counts = tmp_path_factory.mktemp(what) / "counts.json"
        counts.write_text(json.dumps({u: s.samples for u, s in zip(urls, manifest.shards, strict=True)}))
        out[what] = (url, urls, counts)
    name = f"train-{DAMAGED:06d}.tar"
    data = bytearray((tiny_dataset / name).read_bytes())
    data[REGION[0] : REGION[1]] = bytes(REGION[1] - REGION[0])
    _overwrite(lab_env, out["damaged"][0], name, bytes(data))
    return out, manifest


def _train(torchrun, lab, tmp_path: Path, urls: list[str], counts: Path, *flags: str):
    record = tmp_path / "record"
    record.mkdir(exist_ok=True)
    pattern = urls[0].rsplit("/", 1)[0] + f"/train-{{000000..{len(urls) - 1:06d}}}.tar"
    proc = ddp_example(
        torchrun,
        pattern,
        record,
        "--epochs=1",
        "--batch-size=16",
        f"--shard-samples={counts}",
        *flags,
        cwd=tmp_path,
        env=lab.env,
    )
    lines = [
        json.loads(x)
        for r in (0, 1)
        if (record / f"rank{r}.jsonl").exists()
        for x in (record / f"rank{r}.jsonl").read_text().splitlines()
    ]
    return proc, [x for x in lines if "keys" in x], [x for x in lines if "samples" in x]


def test_a_damaged_cache_entry_under_ddp_trains_on_every_sample(torchrun, lab_env, shards, tmp_path):
    (url, urls, counts), manifest = shards[0]["clean"], shards[1]
    cache = tmp_path / "cache"
    key_label_pairs(_loader(url, manifest, cache))  # fills the cache
    _damage(Path(ShardCache(cache, 10**9).path_for(urls[DAMAGED])), "zeros")
    proc, steps, ends = _train(
        torchrun, lab_env, tmp_path, urls, counts, f"--cache-dir={cache}", "--max-lost-fraction=0"
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    keys = Counter(k for s in steps for k in s["keys"])
    assert len(keys) == 256 and set(keys.values()) == {1}
    assert [e["samples"] for e in ends] == [{"expected": 128, "delivered": 128, "lost": 0}] * 2
    caches = [LoaderCounters.from_flat(e["counters"]).cache for e in ends]
    assert sum(c.damaged for c in caches if c) == 1  # one rank's reader found it


def test_a_shard_damaged_in_the_store_under_ddp_fails_past_the_budget_naming_it(
    torchrun, lab_env, shards, tmp_path
):
    url, urls, counts = shards[0]["damaged"]
    proc, _, _ = _train(torchrun, lab_env, tmp_path, urls, counts)  # the default budget, 0.1 %
    assert proc.returncode != 0
    said = " ".join((proc.stdout + proc.stderr).split())
    assert "SamplesLostError" in said and f"{url}/train-{DAMAGED:06d}.tar bytes " in said
    assert "max_lost_fraction=0.001" in said and "uploaded again" in said
    print(f"figures: DDP, store copy damaged, default budget: exit {proc.returncode}")


def test_a_shard_damaged_in_the_store_under_ddp_within_a_budget_trains_on_exactly_the_rest(
    torchrun, lab_env, shards, tiny_dataset, tmp_path
):
    _, urls, counts = shards[0]["damaged"]
    lost = _lost_keys(tiny_dataset / f"train-{DAMAGED:06d}.tar", REGION)
    with mounted_tmpfs(tmp_path / "ro", "1m", read_only=True) as ro:
        proc, steps, ends = _train(
            torchrun, lab_env, tmp_path, urls, counts, f"--cache-dir={ro / 'c'}", "--max-lost-fraction=0.1"
        )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    keys = Counter(k for s in steps for k in s["keys"])
    assert set(keys.values()) == {1} and len(keys) == 256 - len(lost) and not set(keys) & lost
    assert sum(e["samples"]["lost"] for e in ends) == len(lost)
    health = [LoaderCounters.from_flat(e["counters"]).cache_health for e in ends]
    assert all(h and h.bypassed_bytes > 0 for h in health)  # read around the cache
    print(f"figures: DDP, store copy damaged, budget 0.1, read-only cache: {len(lost)} samples lost of 256")
