"""One sample's work (loaders/pipeline/samples.py): decode and augment, and the extra CPU per sample
a sweep file can ask for (``augment_cpu_ms``), spent in the augment stage on the reader's thread."""

from __future__ import annotations

import random

import pytest

from loaders import LoaderConfig, make_loader
from loaders.config import PipelineSpec
from loaders.formats.tar import iter_samples
from loaders.observe import StageStats
from loaders.pipeline.samples import process_sample


def _first_sample(dataset):
    shard = sorted(dataset.glob("*.tar"))[0]
    with open(shard, "rb") as f:
        return next(iter(iter_samples(f, str(shard))))


def test_extra_augment_cpu_is_spent_on_the_readers_thread_and_booked_as_augment(tiny_dataset):
    sample = _first_sample(tiny_dataset)
    plain, extra = StageStats(), StageStats()
    process_sample(sample, PipelineSpec(), random.Random(0), plain)
    process_sample(sample, PipelineSpec(augment_cpu_ms=5.0), random.Random(0), extra)
    # thread CPU time, spent until it has passed: at least the asked 5 ms, whatever the host's load
    assert extra.cpu_s["augment"] >= 0.005 and plain.cpu_s["augment"] < extra.cpu_s["augment"]
    assert extra.cpu_s["decode"] > 0 and extra.samples == plain.samples == 1


def test_a_loaders_batches_carry_the_extra_cpu_of_every_sample(tiny_dataset):
    shards = [str(p) for p in sorted(tiny_dataset.glob("*.tar"))][:2]
    config = LoaderConfig(urls=shards, batch_size=16, workers=0, shuffle_buffer=0, augment_cpu_ms=2.0)
    samples = augment_cpu = 0.0
    for batch in make_loader("torch", config):
        samples += len(batch)
        augment_cpu += batch.stats.cpu_s["augment"]
    assert samples > 0 and augment_cpu >= samples * 0.002


@pytest.mark.parametrize("bad", [-1.0, float("nan"), 10_000.0])
def test_extra_augment_cpu_out_of_range_is_refused(bad):
    with pytest.raises(
        ValueError, match=r"augment_cpu_ms=.*CPU milliseconds per sample, from 0 to under 10,000"
    ):
        PipelineSpec(augment_cpu_ms=bad)


def test_extra_decode_cpu_is_spent_in_the_decode_stage(tiny_dataset):
    sample = _first_sample(tiny_dataset)
    plain, extra = StageStats(), StageStats()
    process_sample(sample, PipelineSpec(), random.Random(0), plain)
    process_sample(sample, PipelineSpec(decode_cpu_ms=5.0), random.Random(0), extra)
    assert extra.cpu_s["decode"] - plain.cpu_s["decode"] >= 0.004  # thread CPU, not a sleep
    with pytest.raises(ValueError, match=r"decode_cpu_ms=-1: CPU milliseconds per sample"):
        PipelineSpec(decode_cpu_ms=-1)
