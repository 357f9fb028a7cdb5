"""A synthetic dataset's sample size in the sweep file: parsed like every size, refused outside
what the generator can make, a directory of its own, and the estimate's sample count and bytes."""

from __future__ import annotations

import pytest

from iobench.datasets.samplesize import KIB
from iobench.sweep.checks import ConfigError
from iobench.sweep.datasetspec import parse_datasets
from iobench.sweep.estimate import dataset_size


def _synth(**keys) -> dict:
    return {"synth": {"samples": 8, "shard_size": "16MB", **keys}}


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IOBENCH_CACHE", str(tmp_path))


def test_sample_size_is_a_size_with_its_unit_and_gets_a_directory_of_its_own(tmp_path):
    (default,) = parse_datasets(_synth())
    assert default.path == tmp_path / "datasets" / "synth-samples8-seed0-shard_bytes16000000"  # as before
    assert "target_kb" not in default.synth and default.synth_jpeg_bytes == 110 * KIB
    (small,) = parse_datasets(_synth(sample_size="60KB"))
    assert small.synth["target_kb"] == 60_000 / KIB and small.synth_jpeg_bytes == 60_000
    assert small.path.name == "synth-samples8-seed0-shard_bytes16000000-sample_bytes60000"
    (other,) = parse_datasets(_synth(sample_size="60KiB"))
    assert other.path.name.endswith("-sample_bytes61440") and other.path != small.path
    # the default written out is the default: the same request, the same directory
    assert parse_datasets(_synth(sample_size="110KiB")) == [default]
    assert parse_datasets({"path": "/data/in1k"})[0].synth_jpeg_bytes is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (60, r"dataset\.synth\.sample_size=60: '60' has no unit"),
        ("lots", r"dataset\.synth\.sample_size='lots': not a size"),
        ("30KB", r"dataset\.synth\.sample_size='30KB': .* can be 56-180 KiB .*29\.3 KiB asked"),
        ("1.5MB", r"dataset\.synth\.sample_size='1.5MB': .* can be 56-180 KiB"),
    ],
)
def test_a_sample_size_without_a_unit_or_out_of_range_is_refused_naming_the_key(value, message):
    with pytest.raises(ConfigError, match=message):
        parse_datasets(_synth(sample_size=value))


def test_the_estimate_plans_at_the_sample_size():
    (default,) = parse_datasets({"synth": {"size": "600MB"}})
    assert dataset_size(default) == (round(600e6 / (112 * KIB)), 112 * KIB)  # unchanged
    (small,) = parse_datasets({"synth": {"size": "600MB", "sample_size": "60KB"}})
    per_sample = 60_000 + 2 * KIB  # the JPEG and its tar headers
    assert dataset_size(small) == (round(600e6 / per_sample), per_sample)
    (counted,) = parse_datasets(_synth(sample_size="60KB"))
    assert dataset_size(counted) == (8, per_sample)
