"""The sweep file's checkpoints: section: its cells, and every mistake named by its key."""

from __future__ import annotations

import pytest

from iobench.sweep.config import ConfigError, parse_config


def _raw(checkpoints: dict) -> dict:
    return {
        "dataset": {"path": "/data/in1k-shards"},
        "tiers": [
            {"kind": "local", "name": "nvme"},
            {
                "kind": "s3",
                "name": "rgw",
                "url": "s3://b/data",
                "endpoint_url": "http://127.0.0.1:9",
                "client": "s3fs",
            },
        ],
        "loaders": [{"kind": "torch", "workers": [2, 4]}],
        "accelerators": [{"kind": "emulated", "type": "h100"}, {"kind": "torch", "model": "small_cnn"}],
        "checkpoints": checkpoints,
    }


def test_cells_per_destination_mode_interval_rank_count_and_accelerator():
    cfg = parse_config(
        _raw(
            {
                "state": {"model": "llama3-8b"},
                "to": [
                    {"tier": "nvme", "path": "/ckpt", "io": ["buffered", "direct"]},
                    {"tier": "rgw", "url": "s3://b/ckpt", "writer": ["fsspec", "iobench"]},
                ],
                "mode": ["sync", "async_pinned"],
                "every_steps": [10, 20],
                "saves": 2,
            }
        )
    )
    cells = [c for c in cfg.cells() if c.checkpoint is not None]
    assert len(cells) == 4 * 2 * 2 * 2
    names = {c.checkpoint.destination.name for c in cells}
    assert names == {"nvme-buffered", "nvme-direct", "rgw-fsspec", "rgw-iobench"}
    one = next(c for c in cells if c.cell_id == "ckpt-rgw-iobench-async_pinned-every20-h100x1")
    assert one.tier["name"] == "rgw" and one.checkpoint.destination.location == "s3://b/ckpt"
    assert one.run.max_steps == 20 * 2 + 10 and one.loader.workers == 2  # the first loader setting
    said = one.checkpoint.state_said
    assert "llama3-8b" in said and ("scaled to" in said) == (one.checkpoint.state_bytes < 105_000_000_000)


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"to": [{"tier": "nvme", "path": "/c"}], "state": {}}, "give a model"),
        (
            {"to": [{"tier": "nvme", "path": "/c"}], "state": {"model": "gpt5"}},
            "checkpoints.state.model='gpt5'",
        ),
        (
            {"to": [{"tier": "ssd", "path": "/c"}]},
            "checkpoints.to[0].tier='ssd': name a tier of tiers: (nvme, rgw)",
        ),
        ({"to": [{"tier": "nvme"}]}, "checkpoints.to[0].path: missing"),
        ({"to": [{"tier": "rgw", "url": "/c"}]}, "expected s3://bucket/prefix"),
        ({"to": [{"tier": "rgw", "url": "s3://b/c", "io": "direct"}]}, "only a file tier"),
        ({"to": [{"tier": "nvme", "path": "/c", "writer": "s3torchconnector"}]}, "checkpoints.to[0].writer"),
        ({"to": [{"tier": "nvme", "path": "/c"}], "mode": "lazy"}, "checkpoints.mode[0]='lazy'"),
        ({"to": [{"tier": "nvme", "path": "/c"}], "every_steps": 0}, "checkpoints.every_steps"),
        ({"to": [{"tier": "nvme", "path": "/c"}], "often": 3}, "often"),
        ({"to": []}, "checkpoints.to=[]"),
    ],
)
def test_a_mistake_names_its_key(section, message):
    with pytest.raises(ConfigError) as info:
        parse_config(_raw(section))
    assert message in str(info.value)
