"""LoaderConfig: nested source and pipeline specs, the keywords training code writes, one default
per setting; the source's layers as its spec asks for them."""

from __future__ import annotations

import pytest

from loaders import LoaderConfig, PipelineSpec
from loaders.config import default
from loaders.storage import CacheSpec, SourceSpec, ThrottleSpec
from loaders.storage.layers import CacheOpener, DeadlineOpener, StoreOpener, ThrottleOpener, stack


def test_keywords_go_into_the_nested_specs(tmp_path):
    config = LoaderConfig(
        urls="/d/train-{0..3}.tar",
        batch_size=8,
        workers=1,
        deadline_s=5,
        cache_dir=str(tmp_path),
        cache_bytes=10**6,
        shard_samples={"/d/train-0.tar": 3},
    )
    assert config.pipeline == PipelineSpec(batch_size=8)
    assert config.source == SourceSpec(
        deadline_s=5, cache=CacheSpec(str(tmp_path), 10**6), shard_samples={"/d/train-0.tar": 3}
    )


def test_no_cache_dir_is_no_cache():
    assert LoaderConfig(urls=["/d/a.tar"], cache_dir=None, cache_bytes=10**6).source.cache is None


def test_keywords_go_over_a_given_source_and_a_cache_limit_is_resolved_once(tmp_path):
    given = SourceSpec(deadline_s=30, cache=CacheSpec(str(tmp_path), policy="static"))
    config = LoaderConfig(urls=["/d/a.tar"], source=given, cache_policy="lru", part_bytes=2**20)
    cache = config.source.cache
    assert (cache.dir, cache.policy, config.source.deadline_s, config.source.part_bytes) == (
        str(tmp_path),
        "lru",
        30,
        2**20,
    )
    assert cache.bytes is not None and cache.bytes > 0  # half the free space, for every reader alike


def test_wrong_keywords_and_values_are_refused():
    with pytest.raises(TypeError, match="batchsize"):
        LoaderConfig(urls=["/d/a.tar"], batchsize=8)
    with pytest.raises(ValueError, match="cache_policy='mru'"):
        LoaderConfig(urls=["/d/a.tar"], cache_dir="/tmp/x", cache_policy="mru")
    with pytest.raises(ValueError, match="prefetch=0"):
        LoaderConfig(urls=["/d/a.tar"], prefetch=0)


def test_a_default_is_read_from_the_field_that_holds_it():
    assert (default("workers"), default("shuffle_buffer"), default("concurrency")) == (2, 1000, 4)
    assert default("storage_options") == {} and default("cache") is None


def test_the_credentials_never_print():
    config = LoaderConfig(urls=["s3://b/a.tar"], storage_options={"secret": "s3cr3t"})
    assert "s3cr3t" not in repr(config) and "s3cr3t" not in repr(config.source)


def test_a_source_stacks_the_layers_its_spec_asks_for(tmp_path):
    assert type(stack(SourceSpec())) is StoreOpener
    throttle = ThrottleSpec(bytes_per_s=None, state_path=str(tmp_path / "bucket"))
    opener = stack(SourceSpec(deadline_s=5, throttle=throttle, cache=CacheSpec(str(tmp_path / "c"), 10**6)))
    layers = []
    while True:
        layers.append(type(opener))
        if isinstance(opener, StoreOpener):
            break
        opener = opener.inner
    assert layers == [CacheOpener, ThrottleOpener, DeadlineOpener, StoreOpener]
