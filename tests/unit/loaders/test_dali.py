"""The DALI backend in CPU mode (device_id=None): exact sample sets, rank split, layout, errors, resume."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from loaders.config import LoaderConfig
from loaders.formats.tar import iter_samples
from tests.helpers.paths import ROOT as REPO

try:
    import nvidia.dali  # noqa: F401
except ImportError:
    if os.environ.get("CI"):
        pytest.fail(
            "NVIDIA DALI is not installed but CI is set: pip install 'iobench[dali]' (nvidia-dali-cuda130)",
            pytrace=False,
        )
    pytest.skip("NVIDIA DALI not installed (pip install 'iobench[dali]')", allow_module_level=True)

from loaders.backends.dali import DaliLoader, DaliPipelineError
from loaders.pipeline.samples import SampleError
from tests.helpers.shardkit import label_of, tiny_jpeg, write_shard

ROOT = REPO


def _config(**kw) -> LoaderConfig:
    return LoaderConfig(**{"batch_size": 32, "workers": 2, "shuffle_buffer": 64, **kw})


def _shards(directory: Path) -> list[str]:
    return sorted(str(p) for p in directory.glob("train-*.tar"))


def _truth(urls: list[str]) -> Counter:
    found: Counter = Counter()
    for url in urls:
        with open(url, "rb") as f:
            for s in iter_samples(f, url):
                found[(s.key, int(s.parts["cls"]))] += 1
    return found


def _read(loader) -> Counter:
    got: Counter = Counter()
    for batch in loader:
        assert batch.images.dtype == torch.uint8 and batch.labels.dtype == torch.int64
        assert batch.images.shape[1:] == (3, 224, 224)
        assert batch.images.is_contiguous(memory_format=torch.channels_last)
        assert len(batch.keys) == batch.images.shape[0] == batch.labels.shape[0]
        got.update(zip(batch.keys, batch.labels.tolist(), strict=True))
    return got


@pytest.mark.parametrize("mode", ["reader", "external"])
def test_every_sample_once_with_its_label(tiny_dataset, mode):
    urls = _shards(tiny_dataset)
    loader = DaliLoader(_config(urls=urls, options={"mode": mode}))
    assert loader.mode == mode and loader.decode_device == "cpu" and loader.num_threads == 2
    truth = _truth(urls)
    assert _read(loader) == truth
    assert loader.stats.samples == 256 and loader.stats.bytes_read > 256 * 50_000
    assert loader.stats.wall_s["decode"] > 0
    if mode == "external":
        assert loader.stats.wall_s["fetch"] > 0
    assert _read(loader) == truth  # a second epoch


@pytest.mark.parametrize("mode", ["reader", "external"])
def test_ranks_are_disjoint_and_cover(tiny_dataset, mode):
    urls = _shards(tiny_dataset)
    parts = [
        _read(DaliLoader(_config(urls=urls, rank=r, world_size=2, options={"mode": mode}))) for r in (0, 1)
    ]
    assert not set(parts[0]) & set(parts[1])
    assert parts[0] + parts[1] == _truth(urls)


@pytest.mark.parametrize("mode", ["reader", "external"])
def test_len_is_the_batches_every_rank_yields(tiny_dataset, mode):
    # 256 samples over 3 ranks: 85 or 86 each; every rank yields len() batches, the same number
    urls = _shards(tiny_dataset)
    counts = []
    for rank in range(3):
        loader = DaliLoader(_config(urls=urls, rank=rank, world_size=3, options={"mode": mode}))
        batches = list(loader)
        assert len(batches) == len(loader) == 3
        counts.append(sum(len(b.keys) for b in batches))
        loader.close()
    if mode == "external":
        assert counts == [85, 85, 85]  # the even split drops 256 % 3 = 1 sample this epoch
    else:
        assert sum(counts) == 256  # DALI's own split: shards of 86, 85, 85


def test_whole_image_decode_on_request_gives_every_sample_in_shape(tiny_dataset):
    """decode_roi=False: decoders.image, then random_resized_crop (the comparison to the fused
    region decode), the same batches' shapes and samples."""
    urls = _shards(tiny_dataset)[:2]
    assert _read(DaliLoader(_config(urls=urls, decode_roi=False, options={"mode": "reader"}))) == _truth(urls)


def test_normalize_gives_float_channels_last(tiny_dataset):
    loader = DaliLoader(_config(urls=_shards(tiny_dataset)[:2], normalize=True, options={"mode": "reader"}))
    batch = next(iter(loader))
    assert batch.images.dtype == torch.float32 and batch.images.shape[1:] == (3, 224, 224)
    assert -3 < float(batch.images.mean()) < 3


@pytest.mark.parametrize("mode", ["reader", "external"])
def test_resume_mid_epoch_loses_and_repeats_nothing(tiny_dataset, mode):
    urls = _shards(tiny_dataset)
    first = DaliLoader(_config(urls=urls, options={"mode": mode}))
    got: Counter = Counter()
    for i, batch in enumerate(first):
        got.update(zip(batch.keys, batch.labels.tolist(), strict=True))
        if i == 2:
            state = first.state_dict()
            break
    assert state["delivered"] == 3
    assert (state["readers"] == [None]) == (mode == "reader")  # the reader mode's position is DALI's
    later = first.state_dict()  # after the loop stopped too: the skeleton's cursor
    assert (later["epoch"], later["readers"], later["delivered"]) == (state["epoch"], state["readers"], 3)
    second = DaliLoader(_config(urls=urls, options={"mode": mode}))
    second.load_state_dict(state)
    assert got + _read(second) == _truth(urls)


def test_the_external_feed_resumes_in_the_uninterrupted_order(tiny_dataset):
    # the feed's state: its fetchers' shard cursors, whose turn it is, the shuffle buffer
    cfg = _config(urls=_shards(tiny_dataset), options={"mode": "external"})
    reference = [k for batch in DaliLoader(cfg) for k in batch.keys]
    first = DaliLoader(cfg)
    before = []
    for batch in first:
        before += batch.keys
        if len(before) == 96:
            break
    state = first.state_dict()
    assert state["readers"][0]["samples"]["buffer"]  # samples held in the shuffle buffer
    second = DaliLoader(cfg)
    second.load_state_dict(state)
    assert before + [k for batch in second for k in batch.keys] == reference


@pytest.fixture
def corrupt_shards(tmp_path):
    from iobench.datasets.wdsindex import write_wds_index

    urls = []
    for s in range(2):
        members = []
        for k in range(s * 8, s * 8 + 8):
            data = tiny_jpeg(k)
            if k == 11:
                data = b"\0not a jpeg" * (len(data) // 11)
            members += [(f"{k:06d}.jpg", data), (f"{k:06d}.cls", str(label_of(f"{k:06d}")).encode())]
        path = write_shard(tmp_path / f"train-{s:06d}.tar", members)
        write_wds_index(path)
        urls.append(str(path))
    return urls


def test_corrupt_jpeg_in_dali_reader_fails_naming_the_shard(corrupt_shards):
    loader = DaliLoader(_config(urls=corrupt_shards, batch_size=4, options={"mode": "reader"}))
    with pytest.raises(DaliPipelineError, match=r"train-000001\.tar: sample '000011'"):
        _read(loader)


def test_external_source_skips_and_counts_corrupt_jpeg(corrupt_shards):
    loader = DaliLoader(
        _config(urls=corrupt_shards, batch_size=4, options={"mode": "external"}, max_lost_fraction=None)
    )
    got = _read(loader)
    assert sorted(k for k, _ in got) == [f"{k:06d}" for k in range(16) if k != 11]
    assert loader.stats.errors["corrupt_sample"] == 1
    assert "train-000001.tar" in loader.stats.error_examples[0]
    failing = DaliLoader(
        _config(urls=corrupt_shards, batch_size=4, on_error="fail", options={"mode": "external"})
    )
    with pytest.raises(SampleError, match=r"train-000001\.tar: sample '000011'"):
        _read(failing)


def test_mode_choice_and_refusals(tiny_dataset):
    urls = _shards(tiny_dataset)
    assert DaliLoader(_config(urls=urls)).mode == "reader"
    assert DaliLoader(_config(urls=["s3://b/train-000000.tar"])).mode == "external"
    with pytest.raises(ValueError, match="s3:// shards only"):
        DaliLoader(_config(urls=urls, options={"mode": "dali-s3"}))
    with pytest.raises(ValueError, match="local or mounted"):
        DaliLoader(_config(urls=["s3://b/train-000000.tar"], options={"mode": "reader"}))


def test_gpu_check_cpu_smoke_prints_the_table():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "gpu_check.py"),
            "--cpu-smoke",
            # 4 batches a loader (2 of them warm-up): enough for the table, half the default's work
            "--samples",
            "64",
            "--batch-size",
            "16",
            "--workers",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "samples/s" in proc.stdout and "wait p99 ms" in proc.stdout
    assert "torch DataLoader (CPU decode)" in proc.stdout and "DALI cpu" in proc.stdout
    # the model warmed up and timed alone before any loader; each loader's host step against it
    assert proc.stdout.index("step alone (warmed up, before any loader)") < proc.stdout.index(
        "torch DataLoader"
    )
    assert "host step ms" in proc.stdout and "x alone" in proc.stdout


def test_extra_augment_cpu_is_refused_naming_the_loaders_that_take_it(tiny_dataset):
    with pytest.raises(
        ValueError, match=r"augment_cpu_ms=1\.5: DALI decodes and augments inside its own graph.*torch"
    ):
        next(iter(DaliLoader(_config(urls=_shards(tiny_dataset), augment_cpu_ms=1.5))))
