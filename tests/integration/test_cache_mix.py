"""A shard cache in front of a throttled S3 backend on the lab's radosgw, read without decoding:
the sweep's partial-hit cell is paired with its cache-alone and backend-alone cells, predicted by
both mix rules, and recommend takes the sweep's word for how the two share the reads
(recommend/mixrule.py; the full measurement is docs/recommend.md's *Cache and backend*)."""

from __future__ import annotations

import uuid

import pytest
import yaml

from iobench.recommend.cli import recommend
from iobench.recommend.mixrule import mix_cells
from tests.unit.recommend.test_model import _args


@pytest.fixture
def s3_env(ceph_lab, monkeypatch):
    for key, value in ceph_lab.env.items():
        monkeypatch.setenv(key, value)
    return ceph_lab


def test_a_partial_hit_cache_is_predicted_from_the_cache_and_the_backend_alone(
    s3_env, iobench_sweep, tiny_dataset, tmp_path
):
    url = f"s3://iobench-{uuid.uuid4().hex[:8]}/mix"
    link = {"kind": "throttled", "bandwidth": "8MB/s"}
    inner = {"kind": "s3", "url": url, "cache_policy": "static"}
    cfg = {
        "dataset": {"path": str(tiny_dataset)},
        "tiers": [
            {**link, "name": "backend", "inner": {"kind": "s3", "url": url}, "upload": True},
            {
                **link,
                "name": "half",
                "inner": {**inner, "cache_dir": str(tmp_path / "c1"), "cache_size": "14MB"},
            },
            {
                **link,
                "name": "all",
                "inner": {**inner, "cache_dir": str(tmp_path / "c2"), "cache_size": "100MB"},
            },
        ],
        "loaders": [
            {"kind": "torch", "workers": [2], "batch_size": [16], "decode": False, "shuffle_buffer": 0}
        ],
        "accelerators": [
            {"kind": "emulated", "type": "custom", "samples_per_s": 100000, "host_work": "none"}
        ],
        "run": {"cache": ["cold"], "warmup_steps": 1, "epochs": 3, "min_measure": {"seconds": 0, "steps": 0}},
    }
    path = tmp_path / "mix.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "run"
    proc = iobench_sweep.run("sweep", path, "--out", out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [cell] = mix_cells([out])
    # 14 MB of the tiny dataset's ~28 MB kept (static, whole shards): about half the reads hit
    assert cell.cell.startswith("half-") and 0.25 <= cell.hit <= 0.6 and cell.readers == 2
    # the cache alone reads at disk speed, the backend alone at its 8 MB/s link
    assert cell.cache_alone > 3 * cell.backend_alone and cell.backend_alone * 115e3 <= 9e6
    # the partial cell lies near the two rules' band: times add (the lower) to concurrent service
    low, high = sorted((cell.predicted("harmonic"), cell.predicted("concurrent")))
    assert 0.7 * low <= cell.measured <= 1.3 * high, (cell, low, high)
    # recommend reads the sweep: a cache sweep that decodes nothing narrows the rule (or says why not);
    # its decode rate comes from elsewhere (--decode-rate, or a decoding sweep beside it)
    report = recommend(
        _args(
            "--decode-rate",
            "900",
            "--dataset-size",
            "50TB",
            "--accelerators",
            "16xH200",
            "--tier-rate",
            "ceph=2.5GB/s",
            "--results",
            str(out),
        )
    )
    assert report.mix_cells == (cell,) and "partial-hit cell(s) of --results" in report.scenario.mix.said
