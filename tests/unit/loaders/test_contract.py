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

    from iobench.cell.steps.loaderfactory import epoch_factory, loader_config
    from iobench.results.spec import LoaderSettings, RunSettings

    row = LoaderSettings(kind="nodes", workers=2, batch_size=8, prefetch=2, shuffle_buffer=16)
    make_epoch = epoch_factory(row.kind, loader_config(urls, SourceSpec(), row, RunSettings(seed=3)))
    assert sorted(k for b in make_epoch(0) for k in b.keys) == ALL_KEYS
    with pytest.raises(ValueError, match="known loaders are"):
        epoch_factory("nope", loader_config(urls, SourceSpec(), row, RunSettings()))


# -- exact resume: each reader goes on from its pipeline state, reading nothing delivered again --


def _spans(urls) -> dict[str, int]:
    """Each sample's bytes in its shard: its members' headers, data and padding."""
    import tarfile

    out: Counter = Counter()
    for url in urls:
        with tarfile.open(url) as tf:
            for member in tf.getmembers():
                out[member.name.split(".", 1)[0]] += (
                    member.offset_data + -(-member.size // 512) * 512 - member.offset
                )
    return out


def _by_reader(batches) -> dict[int, list]:
    readers: dict[int, list] = {}
    for batch in batches:
        readers.setdefault(batch.reader, []).append(batch)
    return readers


def _found(state, key: str) -> list[dict]:
    """Every node state within ``state`` that has ``key`` (a shuffle's "buffer", a cursor's "at")."""
    if isinstance(state, dict):
        return ([state] if key in state else []) + [d for v in state.values() for d in _found(v, key)]
    if isinstance(state, list):
        return [d for v in state for d in _found(v, key)]
    return []


def _same_batches(ours, theirs) -> bool:
    return [b.keys for b in ours] == [b.keys for b in theirs] and all(
        torch.equal(a.images, b.images) for a, b in zip(ours, theirs, strict=True)
    )


@pytest.mark.parametrize("name", ["torch", "threads", "nodes"])
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize(("shuffle", "k"), [(0, 1), (0, 3), (16, 1), (16, 3), (16, 7)])
def test_resume_goes_on_exactly_and_reads_nothing_delivered_again(urls, name, workers, shuffle, k):
    cfg = small_config(urls, workers=workers, shuffle_buffer=shuffle)
    before, after, state = _resume(name, cfg, k)
    whole = make_loader(name, cfg)
    whole.set_epoch(1)
    reference = list(whole)
    # each reader goes on with exactly the batches it would have made, crops included (a reader's
    # order is its own: DataLoader takes its workers in turn, from worker 0 again after a resume)
    ours, theirs = _by_reader(before + after), _by_reader(reference)
    assert sorted(ours) == sorted(theirs) and all(_same_batches(ours[r], theirs[r]) for r in theirs)
    if workers == 0 or name == "nodes":  # one reader: the uninterrupted order itself
        assert _same_batches(before + after, reference)
    # where the state stood: inside a shard (no shuffle), or with samples held in the buffer
    if shuffle:
        assert any(held["buffer"] for held in _found(state, "buffer"))
    else:
        assert any(cursor["index"] not in (None, 0) for cursor in _found(state, "at"))
    # the resumed loader read every byte it delivered, and none of the samples delivered before
    spans = _spans(urls)
    delivered = sum(spans[key] for b in before for key in b.keys)
    total = whole.stats.bytes_read
    second = sum(b.stats.bytes_read for b in after)
    assert total - delivered - 512 * len(urls) <= second <= total - delivered


@pytest.mark.parametrize("name", ["torch", "threads", "nodes"])
def test_resume_across_an_epoch_boundary_and_into_a_loader_already_running(urls, name):
    cfg = small_config(urls, workers=2, shuffle_buffer=16)
    whole = make_loader(name, cfg)
    whole.set_epoch(1)
    reference = _by_reader(list(whole))
    first = make_loader(name, cfg)
    list(first)  # epoch 0 whole (the torch backend's workers went on into epoch 1 meanwhile)
    boundary = json.loads(json.dumps(first.state_dict()))
    assert boundary["epoch"] == 1 and not any(boundary["readers"]) and boundary["delivered"] == 0
    before = []
    for batch in first:
        before.append(batch)
        if len(before) == 3:
            break
    mid = json.loads(json.dumps(first.state_dict()))
    second = make_loader(name, cfg)
    second.load_state_dict(boundary)  # from the boundary: all of epoch 1
    ours = _by_reader(list(second))
    assert sorted(ours) == sorted(reference) and all(_same_batches(ours[r], reference[r]) for r in reference)
    first.load_state_dict(mid)  # the same loader, its workers running: they start again from the states
    ours = _by_reader(before + list(first))
    assert all(_same_batches(ours[r], reference[r]) for r in reference)
