"""DataLoader workers of the torch backend: persistent across epochs (the next epoch reaches the
living workers, which start on it before they are asked unless prefetch_next_epoch=False), every start
method (fork, forkserver, spawn) with the batch-buffer ring, and the DataLoader keywords a user
passes."""

from __future__ import annotations

import functools
import gc
import itertools
import multiprocessing
import os
import time
from pathlib import Path

import pytest
import torch

from loaders import AugmentSpec, ShardLoader, make_loader
from loaders.options import OptionError
from tests.helpers.shardkit import ALL_KEYS, label_of, make_shards, small_config
from tests.helpers.shm import shm_entries, shm_left_beyond


def _note_start(directory: str, worker_id: int) -> None:
    Path(directory, f"{os.getpid()}-{worker_id}").touch()


@pytest.fixture(scope="module")
def urls(tmp_path_factory):
    return make_shards(tmp_path_factory.mktemp("shards"), n_shards=4, per_shard=10)


def _keys(batches) -> list[str]:
    return [k for b in batches for k in b.keys]


MODES = {  # DataLoader workers: kept and running ahead (default), kept, forked every epoch
    "ahead": {},
    "persistent": {"prefetch_next_epoch": False},
    "per-epoch": {"persistent_workers": False},
}


@pytest.mark.parametrize("mode", list(MODES))
def test_persistent_workers_start_once_and_serve_every_epoch(urls, tmp_path, mode):
    starts = tmp_path / "starts"
    starts.mkdir()
    loader = ShardLoader(
        urls,
        batch_size=4,
        workers=2,
        shuffle_buffer=16,
        return_batches=True,
        augment=AugmentSpec(size=32),
        worker_init_fn=functools.partial(_note_start, str(starts)),
        **MODES[mode],
    )
    orders = []
    for epoch in range(3):
        loader.set_epoch(epoch)
        keys = _keys(loader)
        assert sorted(keys) == ALL_KEYS
        orders.append(keys)
    assert len(set(map(tuple, orders))) == 3  # a new order every epoch
    assert len(list(starts.iterdir())) == (6 if mode == "per-epoch" else 2)
    loader.close()


@pytest.mark.parametrize("mode", list(MODES))
def test_the_next_epoch_is_the_epoch_a_fresh_loader_reads(urls, mode):
    cfg = small_config(urls, workers=2, seed=4, options=MODES[mode])
    loader = make_loader("torch", cfg)
    for epoch in (0, 1, 5, 2):  # in sequence, a jump ahead, a step back
        loader.set_epoch(epoch)
        fresh = make_loader("torch", cfg)
        fresh.set_epoch(epoch)
        assert _keys(loader) == _keys(fresh)
        fresh.close()
    loader.close()


@pytest.mark.parametrize("mode", list(MODES))
def test_an_epoch_left_early_does_not_leak_into_the_next(urls, mode):
    loader = make_loader("torch", small_config(urls, workers=2, options=MODES[mode]))
    partial = _keys(itertools.islice(iter(loader), 3))
    assert len(partial) == 12
    loader.set_epoch(1)
    assert sorted(_keys(loader)) == ALL_KEYS
    loader.set_epoch(2)
    batches = []
    for batch in loader:  # a consumer that stops after the last batch, before StopIteration
        batches.append(batch)
        if len(batches) == len(loader):
            break
    assert sorted(_keys(batches)) == ALL_KEYS
    assert sorted(_keys(loader)) == ALL_KEYS  # epoch 3 (ahead: goes on from the workers' streams)
    loader.close()


def _count_decodes(counter, _worker_id: int, pause_s: float = 0.0) -> None:
    import loaders.pipeline.samples as pipeline

    decode = pipeline.decode_crop

    def counted(*args):
        with counter.get_lock():
            counter.value += 1
        time.sleep(pause_s)
        return decode(*args)

    pipeline.decode_crop = counted


@pytest.mark.parametrize("ahead", [True, False])
def test_running_ahead_past_the_last_epoch_reads_a_few_batches_not_an_epoch(urls, ahead):
    """After the last epoch the loop reads, the workers have decoded what DataLoader asked of them
    (prefetch per worker) and what a worker that ended its share first made meanwhile: a few
    batches, never the whole next epoch (40 samples here); with prefetch_next_epoch=False, none."""
    decoded = multiprocessing.get_context("fork").Value("i", 0)
    workers, prefetch, batch = 2, 2, 4
    loader = ShardLoader(
        urls,
        batch_size=batch,
        workers=workers,
        prefetch=prefetch,
        shuffle_buffer=16,
        augment=AugmentSpec(size=32),
        multiprocessing_context="fork",
        worker_init_fn=functools.partial(_count_decodes, decoded),
        prefetch_next_epoch=ahead,
    )
    assert sum(len(labels) for _, labels in loader) == 40
    last, deadline = -1, time.monotonic() + 10
    while decoded.value != last and time.monotonic() < deadline:  # until the workers are idle
        last = decoded.value
        time.sleep(0.5)
    loader.close()
    extra = decoded.value - 40
    print(f"figures: decoded past the last epoch: {extra} samples (prefetch_next_epoch={ahead})")
    assert (0 < extra <= (prefetch + 1) * workers * batch) if ahead else extra == 0, extra


def test_a_loader_dropped_while_its_workers_read_ahead_stops_them_at_the_next_sample(urls):
    """Garbage collected like close(): each worker stops at its next sample instead of finishing
    the batch in hand (of the next epoch, which nobody will take) before DataLoader's shutdown
    reaches it. 8-sample batches at 50 ms a sample: each worker is mid-batch when the loader goes."""
    decoded = multiprocessing.get_context("fork").Value("i", 0)
    workers = 2
    loader = ShardLoader(
        urls,
        batch_size=8,
        workers=workers,
        prefetch=2,
        augment=AugmentSpec(size=32),
        multiprocessing_context="fork",
        worker_init_fn=functools.partial(_count_decodes, decoded, pause_s=0.05),
    )
    assert sum(len(labels) for _, labels in loader) == 40
    at_drop = decoded.value
    t0 = time.perf_counter()
    del loader
    gc.collect()
    took = time.perf_counter() - t0
    extra = decoded.value - at_drop
    print(f"figures: dropped after {at_drop - 40} samples past the epoch; {extra} more decoded, {took:.2f} s")
    assert extra <= workers, extra  # the sample each worker had in hand


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_every_start_method_uses_the_ring_and_leaves_no_shared_memory(urls, method):
    before = shm_entries()
    loader = make_loader("torch", small_config(urls, workers=1, options={"multiprocessing_context": method}))
    ring_slots = None
    for epoch in range(2):
        loader.set_epoch(epoch)
        batches = list(loader)  # all held: the ring's slots stay taken while their batches live
        if ring_slots is None:
            ring = loader.dataset.ring
            ring_slots = ring.workers * ring.slots_per_worker
            assert ring.free_slots() < ring_slots  # batches came through the ring, not torch's
        assert sorted(_keys(batches)) == ALL_KEYS
        assert all(b.labels.tolist() == [label_of(k) for k in b.keys] for b in batches)
        del batches
    loader.close()
    del loader
    gc.collect()  # DataLoader's queues unlink their semaphores when collected
    assert not shm_left_beyond(before)


def test_dataloader_keywords_are_honoured_or_refused_with_a_reason(urls):
    g = torch.Generator().manual_seed(1)
    loader = ShardLoader(
        urls, num_workers=1, prefetch_factor=3, timeout=30, generator=g, multiprocessing_context="spawn"
    )
    dl = loader._loader
    assert loader.config.workers == 1 and dl.prefetch_factor == 3 and dl.timeout == 30 and dl.generator is g
    assert dl.persistent_workers is True and dl.multiprocessing_context.get_start_method() == "spawn"
    assert loader.continuous is True  # persistent and running ahead, unless told not to
    for name, why in [("sampler", "even split"), ("shuffle", "shuffle_buffer"), ("collate_fn", "in place")]:
        with pytest.raises(TypeError, match=f"{name} .*{why}"):
            ShardLoader(urls, **{name: None})
    with pytest.raises(TypeError, match="both num_workers and workers"):
        ShardLoader(urls, num_workers=1, workers=2)
    with pytest.raises(OptionError, match="multiprocessing_context"):
        make_loader("torch", small_config(urls, options={"multiprocessing_context": "threads"}))
    assert (
        make_loader(
            "torch", small_config(urls, workers=1, options={"persistent_workers": False})
        )._loader.persistent_workers
        is False
    )


def test_a_worker_error_ends_the_epoch_and_the_next_starts_new_workers(tmp_path):
    from loaders import SampleError
    from tests.helpers.shardkit import tiny_jpeg, write_shard

    good = make_shards(tmp_path / "good", n_shards=2, per_shard=8)
    members = [("000100.jpg", b"not a jpeg"), ("000100.cls", b"1")]
    bad = str(
        write_shard(tmp_path / "bad.tar", [*members, ("000101.jpg", tiny_jpeg(1)), ("000101.cls", b"1")])
    )
    loader = make_loader("torch", small_config([*good, bad], workers=1, on_error="fail"))
    with pytest.raises(SampleError, match="000100"):
        list(loader)
    assert loader._loader._iterator is None  # the failed workers are gone
    loader.close()
