"""The loader contract: one config, backends by name, and mid-epoch resume on the DataLoader backend."""

from __future__ import annotations

import json
import sys
from collections import Counter

import pytest
import torch

from loaders import AugmentSpec, Batch, Loader, LoaderConfig, ShardLoader, make_loader, register_loader
from loaders.registry import available_loaders
from loaders.storage import SourceSpec
from tests.helpers.shardkit import ALL_KEYS, key_label_pairs, label_of, make_shards, small_config


@pytest.fixture(scope="module")
def urls(tmp_path_factory):
    return make_shards(tmp_path_factory.mktemp("shards"), n_shards=4, per_shard=10)


def test_config_needs_exactly_one_of_urls_and_objects():
    with pytest.raises(ValueError, match="give shard urls"):
        LoaderConfig()
    with pytest.raises(ValueError, match="give shard urls"):
        LoaderConfig(urls=["a"], objects=[("k", "u", 1)])
    with pytest.raises(ValueError, match="on_error"):
        LoaderConfig(urls=["a"], on_error="retry")


def test_registry_names_and_third_party_backends(urls):
    assert {"torch", "nodes", "dali"} <= set(available_loaders())
    with pytest.raises(ValueError, match="known loaders are"):
        make_loader("nope", small_config(urls))

    class Fixed:
        def __init__(self, config):
            self.config, self.stats = config, None

        def __iter__(self):
            return iter([])

        def set_epoch(self, e):
            pass

        def state_dict(self):
            return {}

        def load_state_dict(self, d):
            pass

    register_loader("fixed-test", Fixed)
    built = make_loader("fixed-test", small_config(urls))
    assert isinstance(built, Fixed) and isinstance(built, Loader)


def test_dali_without_dali_installed_gives_the_install_hint(urls, monkeypatch):
    # None in sys.modules makes the import fail as if the module (or nvidia.dali under it) were missing
    monkeypatch.setitem(sys.modules, "loaders.backends.dali", None)
    with pytest.raises(ImportError, match=r"pip install 'iobench\[dali\]'"):
        make_loader("dali", small_config(urls))


def test_torch_backend_by_name_yields_batches_and_meets_the_protocol(urls):
    loader = make_loader("torch", small_config(urls, normalize=True, device="cpu"))
    assert isinstance(loader, ShardLoader) and isinstance(loader, Loader)
    batches = list(loader)
    assert all(isinstance(b, Batch) for b in batches)
    assert batches[0].images.dtype == torch.float32  # normalize=True; uint8 is the default
    assert sorted(key_label_pairs(batches)) == [(k, label_of(k)) for k in ALL_KEYS]
    assert loader.stats.samples == 40


@pytest.mark.parametrize("name", ["torch", "threads"])
@pytest.mark.parametrize("workers", [0, 2])
def test_every_epoch_is_the_same_multiset_in_a_new_order(urls, name, workers):
    loader = make_loader(name, small_config(urls, workers=workers))
    orders = []
    for epoch in range(2):
        loader.set_epoch(epoch)
        batches = list(loader)
        assert key_label_pairs(batches) == Counter((k, label_of(k)) for k in ALL_KEYS)
        orders.append([k for b in batches for k in b.keys])
    assert orders[0] != orders[1]


@pytest.mark.parametrize("name", ["torch", "threads"])
def test_ranks_read_disjoint_samples_covering_the_dataset(urls, name):
    seen = Counter()
    for rank in range(2):
        seen.update(
            k
            for b in make_loader(name, small_config(urls, workers=2, rank=rank, world_size=2))
            for k in b.keys
        )
    assert sorted(seen) == ALL_KEYS and set(seen.values()) == {1}


def _resume(name: str, cfg: LoaderConfig, k: int, epoch: int = 1) -> tuple[list[Batch], list[Batch], dict]:
    """k batches of ``epoch`` from one loader, then the rest from a new loader given its state."""
    first = make_loader(name, cfg)
    first.set_epoch(epoch)
    before = []
    for batch in first:
        before.append(batch)
        if len(before) == k:
            break
    state = json.loads(json.dumps(first.state_dict()))  # plain data: it can go in a checkpoint
    second = make_loader(name, cfg)
    second.load_state_dict(state)
    second.set_epoch(epoch)  # a training loop that calls set_epoch(e) again keeps the position
    return before, list(second), state


@pytest.mark.parametrize("name", ["torch", "threads"])
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("k", [1, 3])
def test_resume_mid_epoch_loses_and_repeats_nothing(urls, name, workers, k):
    cfg = small_config(urls, workers=workers)
    before, after, state = _resume(name, cfg, k)
    assert state["epoch"] == 1 and state["delivered"] == k
    keys = [key for b in before + after for key in b.keys]
    assert sorted(keys) == ALL_KEYS  # the union is one epoch, no duplicates
    if workers == 0:
        # one reader: the resumed epoch is the uninterrupted one, crops included
        whole = make_loader(name, cfg)
        whole.set_epoch(1)
        reference = list(whole)
        assert [b.keys for b in before + after] == [b.keys for b in reference]
        assert all(torch.equal(a.images, b.images) for a, b in zip(before + after, reference, strict=True))


def test_state_at_an_epoch_end_starts_the_next_epoch(urls):
    loader = make_loader("torch", small_config(urls))
    list(loader)
    state = loader.state_dict()
    assert state["epoch"] == 1 and state["readers"] == [None] and state["delivered"] == 0


def test_resume_with_other_settings_is_refused(urls):
    state = make_loader("torch", small_config(urls, workers=2)).state_dict()
    with pytest.raises(ValueError, match="readers"):
        make_loader("torch", small_config(urls, workers=1)).load_state_dict(state)
    with pytest.raises(ValueError, match="seed"):
        make_loader("torch", small_config(urls, workers=2, seed=5)).load_state_dict(state)


def test_shardloader_keywords_and_config_are_one_path(urls):
    with pytest.raises(TypeError, match="wokers"):
        ShardLoader(urls, wokers=2)
    plain = ShardLoader(urls, batch_size=4, workers=0, shuffle_buffer=16, augment=AugmentSpec(size=32))
    via_config = ShardLoader(small_config(urls))
    assert [labels.tolist() for _, labels in plain] == [b.labels.tolist() for b in via_config]
    with pytest.raises(TypeError, match="not both"):
        ShardLoader(small_config(urls), workers=2)


@pytest.mark.parametrize("name", ["torch", "threads", "nodes"])
def test_make_loader_checks_a_backends_options_once(urls, name, monkeypatch):
    from loaders.registry import Backend

    calls = []
    check = Backend.check
    monkeypatch.setattr(Backend, "check", lambda self, options: calls.append(options) or check(self, options))
    make_loader(name, small_config(urls))
    assert len(calls) == 1


def test_sweep_loader_kind_selects_the_backend(urls):
    from dataclasses import replace

    from iobench.cell.steps.loaderfactory import epoch_factory
    from iobench.results.spec import LoaderSettings, RunSettings

    row = LoaderSettings(kind="nodes", workers=2, batch_size=8, prefetch=2, shuffle_buffer=16)
    make_epoch = epoch_factory(urls, SourceSpec(), row, RunSettings(seed=3))
    assert sorted(k for b in make_epoch(0) for k in b.keys) == ALL_KEYS
    with pytest.raises(ValueError, match="known loaders are"):
        epoch_factory(urls, SourceSpec(), replace(row, kind="nope"), RunSettings())
