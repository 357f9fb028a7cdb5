"""The loaders' Prometheus exporter, scraped over HTTP while real loaders run (over the lab's S3:
tests/integration/test_prometheus_s3.py)."""

from __future__ import annotations

import itertools
import json
import re
import socket
import threading
from pathlib import Path

import pytest

from loaders import Loader, make_loader
from loaders.observe.nvml import Nvml
from loaders.observe.prometheus import LoaderExporter, exported
from tests.helpers.fakenvml import GIB, FakeGpu, FakeNvmlLib
from tests.helpers.promkit import DOC, Scrape, assert_never_decrease, documented
from tests.helpers.shardkit import (
    make_shards,
    shard_with_a_corrupt_jpeg,
    small_config,
)

LOADER_METRICS = documented("iobench_loader_")
# counted by the object-store client and the shard cache: a loader reading files has none
REMOTE_METRICS = {m for m in LOADER_METRICS if re.search(r"request|transferred|refused|outage|cache_", m)}


def _shards_with_a_corrupt_sample(directory: Path) -> list[str]:
    urls = make_shards(directory, n_shards=3, per_shard=10)
    return [*urls, shard_with_a_corrupt_jpeg(directory / "train-000003.tar", range(30, 40), corrupt=35)]


@pytest.mark.parametrize("backend", ["torch", "nodes"])
def test_scrapes_during_a_run_follow_the_batches_delivered(tmp_path, backend):
    urls = _shards_with_a_corrupt_sample(tmp_path)
    shard_bytes = sum(Path(u).stat().st_size for u in urls)
    loader = exported(make_loader(backend, small_config(urls, workers=2, max_lost_fraction=None)), port=0)
    port = loader.exporter.port
    try:
        delivered = read = 0
        for i, batch in enumerate(loader):
            delivered += len(batch.keys)
            read += batch.stats.bytes_read
            if i == 2:
                mid = Scrape.of(port)
                mid_batches, mid_samples, mid_read = i + 1, delivered, read
        end = Scrape.of(port)
        batches = i + 1
        next(iter(loader))  # epoch 2 begins
        later = Scrape.of(port)
    finally:
        loader.exporter.close()

    train = {"loader": "train"}
    assert mid.value("iobench_loader_samples_total", **train) == mid_samples == 12
    assert mid.value("iobench_loader_wait_seconds_count", **train) == mid_batches
    assert mid.value("iobench_loader_read_bytes_total", tier="file") == mid_read
    assert 0 < mid_read < shard_bytes
    for stage in ("fetch", "decode", "augment", "collate"):
        assert mid.value("iobench_loader_stage_seconds_total", stage=stage) > 0
    assert mid.value("iobench_loader_stage_cpu_seconds_total", stage="decode") > 0
    assert mid.labels_of("iobench_loader_info") == [
        {"loader": "train", "backend": backend, "tier": "file", "workers": "2", "batch_size": "4"}
    ]

    # the whole epoch: 39 good samples of 40, the corrupt one counted, every wait in the histogram
    assert end.value("iobench_loader_samples_total") == delivered == 39
    assert end.value("iobench_loader_sample_errors_total", kind="corrupt_sample") == 1
    assert end.value("iobench_loader_read_bytes_total", tier="file") == read <= shard_bytes
    assert end.value("iobench_loader_wait_seconds_count") == batches
    buckets = sorted(
        (float(labels["le"]), end.value("iobench_loader_wait_seconds_bucket", le=labels["le"]))
        for labels in end.labels_of("iobench_loader_wait_seconds_bucket")
    )
    counts = [n for _, n in buckets]
    assert counts == sorted(counts) and counts[-1] == batches  # cumulative, +Inf holds every batch
    assert end.value("iobench_loader_wait_seconds_sum") > 0
    assert_never_decrease(mid, end)
    assert_never_decrease(end, later)
    assert later.value("iobench_loader_samples_total") > 39

    # every metric a file-reading loader has, and nothing the docs do not define
    assert end.names() == LOADER_METRICS - REMOTE_METRICS


def test_a_scraping_thread_sees_counters_only_grow_while_batches_arrive(tmp_path):
    urls = make_shards(tmp_path, n_shards=4, per_shard=10)
    exporter = LoaderExporter(port=0, gpu=False)
    loader = exporter.track(make_loader("torch", small_config(urls, workers=2)), name="train")
    scrapes: list[Scrape] = []
    done = threading.Event()

    def scrape_until_done() -> None:
        while not done.is_set():
            scrapes.append(Scrape.of(exporter.port))

    scraper = threading.Thread(target=scrape_until_done)
    scraper.start()
    try:
        batches = sum(1 for _ in range(2) for _ in loader)
    finally:
        done.set()
        scraper.join()
    scrapes.append(Scrape.of(exporter.port))
    exporter.close()
    assert len(scrapes) >= 3
    for before, after in itertools.pairwise(scrapes):
        assert_never_decrease(before, after)
    assert scrapes[-1].value("iobench_loader_samples_total") == 80
    assert scrapes[-1].value("iobench_loader_wait_seconds_count") == batches == 20


def test_gpu_metrics_come_from_nvml_in_base_units():
    lib = FakeNvmlLib(
        [
            FakeGpu(utilization=37, memory_used=5 * GIB, pcie_kib_per_s=(1500, 250_000)),
            FakeGpu(utilization=100, memory_used=GIB, pcie_kib_per_s=None),  # PCIe counters unsupported
        ]
    )
    with LoaderExporter(port=0, gpu=Nvml(lib=lib)) as exporter:
        scrape = Scrape.of(exporter.port)
        lib.initialised = False  # NVML stops answering: counted, and the endpoint still serves
        after = Scrape.of(exporter.port)
    assert scrape.value("iobench_gpu_utilization_ratio", gpu="0") == pytest.approx(0.37)
    assert scrape.value("iobench_gpu_utilization_ratio", gpu="1") == 1.0
    assert scrape.value("iobench_gpu_memory_used_bytes", gpu="0") == 5 * GIB
    assert scrape.value("iobench_gpu_memory_total_bytes", gpu="1") == 80 * GIB
    assert scrape.value("iobench_gpu_pcie_tx_bytes_per_second", gpu="0") == 1500 * 1024  # NVML: KB/s
    assert scrape.value("iobench_gpu_pcie_rx_bytes_per_second", gpu="0") == 250_000 * 1024
    # an unsupported PCIe counter is absent, not zero
    assert scrape.labels_of("iobench_gpu_pcie_tx_bytes_per_second") == [{"gpu": "0"}]
    assert scrape.value("iobench_gpu_read_errors_total") == 0
    assert scrape.names() == documented("iobench_gpu_")
    assert after.value("iobench_gpu_read_errors_total") == 1
    assert not after.labels_of("iobench_gpu_utilization_ratio")
    assert lib.shutdowns == 0  # the session was the caller's: the exporter leaves it open


def test_the_exported_loader_is_the_loader_and_any_iterable_can_be_timed(tmp_path):
    urls = make_shards(tmp_path, n_shards=2, per_shard=4)
    with LoaderExporter(port=0, gpu=False) as exporter:
        inner = make_loader("torch", small_config(urls))
        loader = exporter.track(inner, name="train")
        assert isinstance(loader, Loader) and loader.stats is inner.stats
        loader.set_epoch(3)
        assert loader.epoch == 3 and loader.state_dict() == inner.state_dict()
        plain = exporter.track([1, 2, 3], name="mine")  # a loader of your own: its waits only
        assert list(plain) == [1, 2, 3]
        with pytest.raises(ValueError, match="'train' is already exported"):
            exporter.track(inner, name="train")
        with pytest.raises(OSError, match=f"cannot serve metrics on 0.0.0.0:{exporter.port}"):
            LoaderExporter(port=exporter.port, gpu=False)
        port = exporter.port
        scrape = Scrape.of(port)
    assert scrape.value("iobench_loader_wait_seconds_count", loader="mine") == 3
    assert scrape.value("iobench_loader_samples_total", loader="train") == 0
    assert [lab["loader"] for lab in scrape.labels_of("iobench_loader_samples_total")] == ["train"]
    assert exporter.port is None
    with pytest.raises(ConnectionRefusedError):  # closed: nobody answers on the port any more
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_the_dashboard_and_the_docs_name_only_metrics_that_exist():
    dashboard = json.loads((DOC.parent / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert exprs
    used = {re.sub(r"_(bucket|sum|count)$", "", m) for e in exprs for m in re.findall(r"iobench_[a-z_]+", e)}
    defined = documented("iobench_")
    assert used <= defined, used - defined
    # the docs define the loader and GPU exporters' metrics and the monitor's (job, sweep)
    assert {m.split("_")[1] for m in defined} == {"loader", "gpu", "job", "sweep"}
