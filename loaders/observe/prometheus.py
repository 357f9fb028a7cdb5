"""A Prometheus endpoint for the loaders of a real training job, in one line::

    from loaders.observe.prometheus import exported
    loader = exported(make_loader("torch", cfg), port=9450)   # http://HOST:9450/metrics
    for batch in loader: ...                                   # the same loader, timed per batch

The loader's own ``stats`` (samples, per-stage times, bytes, request and cache counters) are read
when Prometheus scrapes, so they cost nothing between scrapes; every backend merges a batch's
stats into ``loader.stats`` as it delivers it, so a scrape sees every batch consumed so far. The
wait in ``next()`` is timed by the wrapper (as :class:`loaders.StallMeter` does) into a histogram.
With NVML the GPUs' utilisation, memory and PCIe throughput are exported too. Several loaders
share one port through :class:`LoaderExporter`; metric definitions are in docs/monitoring.md.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

try:
    from prometheus_client import CollectorRegistry, Histogram, start_http_server
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
    from prometheus_client.registry import Collector
except ImportError as exc:  # an optional extra: say how to get it
    raise ImportError(
        f"the Prometheus exporter needs prometheus-client: pip install 'iobench[prometheus]' ({exc})"
    ) from exc

from loaders.config import LoaderConfig
from loaders.observe.counters import CacheHealthCounts, CacheStats, LoaderCounters, LossCounts, RequestCounts
from loaders.observe.nvml import Nvml, NvmlUnavailable, open_nvml
from loaders.observe.stages import STAGES, StageStats
from loaders.storage.layers import OBJECT_PROTOCOLS

PREFIX = "iobench_loader"
# waits run from microseconds (a prefetched batch) to seconds (a cold shard on a slow tier)
WAIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# the counters of StageStats.counters exported as they are: (metric suffix, reader, help)
_STORAGE_COUNTERS: tuple[tuple[str, Callable[[RequestCounts], float], str], ...] = (
    (
        "requests",
        lambda r: r.requests,
        "Object-store requests (GETs, reads, HEADs), failed and retried included.",
    ),
    ("request_retries", lambda r: r.retries, "Object-store requests repeated after a retryable failure."),
    ("request_failures", lambda r: r.failures, "Object-store requests that failed for good."),
    ("transferred_bytes", lambda r: r.bytes_transferred, "Bytes in successful object-store responses."),
    (
        "refused_connections",
        lambda r: r.refused_connections,
        "Connections refused or reset by an object store after it had answered (an outage ridden through).",
    ),
    (
        "outage_seconds",
        lambda r: r.outage_s,
        "Seconds readers had requests held up by such refusals, summed over readers.",
    ),
)
_CACHE_COUNTERS: tuple[tuple[str, Callable[[CacheStats, CacheHealthCounts], float], str], ...] = (
    (
        "cache_hits",
        lambda c, _: c.hits,
        "Shard-cache lookups that found the shard complete (or waited for it).",
    ),
    ("cache_misses", lambda c, _: c.misses, "Shard-cache lookups that downloaded the shard."),
    ("cache_evictions", lambda c, _: c.evictions, "Shard-cache entries evicted to stay under the limit."),
    (
        "cache_fetched_bytes",
        lambda c, _: c.bytes_fetched,
        "Bytes downloaded into the shard cache and committed.",
    ),
    ("cache_evicted_bytes", lambda c, _: c.bytes_evicted, "Bytes of shard-cache entries evicted."),
    (
        "cache_wait_seconds",
        lambda c, _: c.wait_s,
        "Seconds blocked while another process downloaded a shard.",
    ),
    (
        "cache_damaged",
        lambda c, _: c.damaged,
        "Shard-cache entries found damaged when first opened (checksums at fill differ), fetched again.",
    ),
    ("cache_damaged_bytes", lambda c, _: c.damaged_bytes, "Bytes of the damaged parts of those entries."),
    (
        "cache_bypassed_bytes",
        lambda _, h: h.bypassed_bytes,
        "Bytes read through from the store while the shard cache could not be used (full, read-only, failing).",
    ),
    (
        "cache_unusable",
        lambda _, h: h.unusable,
        "Times the shard cache could not be used and was read around.",
    ),
)
# what was lost: every loader, cached or not
_LOSS_COUNTERS: tuple[tuple[str, Callable[[LoaderCounters, LossCounts], float], str], ...] = (
    (
        "expected_samples",
        lambda c, _: c.epoch_samples_expected or 0,
        "Samples the loader's epochs deliver by their plans (the shards' counts).",
    ),
    (
        "lost_samples",
        lambda c, _: c.epoch_samples_lost,
        "Samples completed epochs delivered short of their plans.",
    ),
    (
        "skipped_region_samples",
        lambda _, lost: lost.samples,
        "Samples in regions of shards the readers skipped as damaged.",
    ),
    ("skipped_region_bytes", lambda _, lost: lost.bytes, "Bytes of shards the readers skipped as damaged."),
)


class _Tracked:
    """One exported loader: its labels, and the snapshot of its stats a scrape reads.

    The storage tier is ``tier`` or the scheme of the loader's first URL ("file", "s3", "rados").
    With a shard cache in front of an object store the pipeline reads the cache's local copies, so
    the bytes it reads are labelled tier="cache" and the store's own bytes are the transferred ones.
    """

    def __init__(self, name: str, loader: Any, tier: str | None) -> None:
        self.name, self.loader = name, loader
        config = getattr(loader, "config", None)
        if not isinstance(config, LoaderConfig):  # a loader of another kind: its settings unknown
            config = None
        scheme = "unknown"
        if config is not None:
            first = config.items()[0]
            url = first[1] if isinstance(first, tuple) else str(first)
            scheme = url.split("://", 1)[0] if "://" in url else "file"
        self.remote = scheme in OBJECT_PROTOCOLS  # read by the object-store client: it counts requests
        self.cached = self.remote and config is not None and config.source.cache is not None
        self.storage_tier = tier or scheme
        self.read_tier = "cache" if self.cached else self.storage_tier
        self.info = {
            "loader": name,
            "backend": str(getattr(loader, "backend", type(loader).__name__)),
            "tier": self.storage_tier,
            "workers": str(config.workers) if config else "",
            "batch_size": str(config.pipeline.batch_size) if config else "",
        }

    def snapshot(self) -> StageStats | None:
        stats = getattr(self.loader, "stats", None)
        if not isinstance(stats, StageStats):
            return None  # any iterable can be exported: then only its wait histogram is
        # the training thread merges into these while a scrape reads them: dict() of a dict is one
        # C call under the GIL, so each copy is whole (never "changed size during iteration")
        return StageStats(
            samples=stats.samples,
            bytes_read=stats.bytes_read,
            wall_s=dict(stats.wall_s),
            cpu_s=dict(stats.cpu_s),
            errors=Counter(dict(stats.errors)),
            counters=stats.counters.copy(),
        )


class LoaderCollector(Collector):
    """Reads every tracked loader's ``stats`` when scraped."""

    def __init__(self) -> None:
        self._tracked: dict[str, _Tracked] = {}
        self._lock = threading.Lock()

    def track(self, name: str, loader: Any, tier: str | None = None) -> None:
        with self._lock:
            if name in self._tracked:
                raise ValueError(
                    f"a loader named {name!r} is already exported here: give each one its own name="
                )
            self._tracked[name] = _Tracked(name, loader, tier)

    def describe(self) -> Iterator:
        # the names, so a registry refuses a second collector exporting the same ones
        return iter(self._families().values())

    def collect(self) -> Iterator:
        with self._lock:
            tracked = list(self._tracked.values())
        families = self._families()
        for t in tracked:
            stats = t.snapshot()
            if stats is None:
                continue
            _add(families, t, stats)
        return iter(families.values())

    @staticmethod
    def _families() -> dict[str, Any]:
        def counter(suffix: str, doc: str, *labels: str) -> CounterMetricFamily:
            return CounterMetricFamily(f"{PREFIX}_{suffix}", doc, labels=["loader", *labels])

        families: dict[str, Any] = {
            "info": InfoMetricFamily(
                PREFIX, "The exported loader: backend, storage tier, workers, batch size."
            ),
            "samples": counter("samples", "Samples delivered to the training loop."),
            "stage": counter(
                "stage_seconds", "Wall seconds the loader's readers spent in each stage, summed.", "stage"
            ),
            "stage_cpu": counter(
                "stage_cpu_seconds", "Thread CPU seconds the readers spent in each stage, summed.", "stage"
            ),
            "read": counter(
                "read_bytes", "Bytes the pipeline read for the samples it delivered, by tier read.", "tier"
            ),
            "errors": counter("sample_errors", "Samples skipped as unreadable, by kind of error.", "kind"),
            "faults": counter("request_faults", "Retryable object-store failures, by kind.", "tier", "kind"),
        }
        for suffix, _, doc in _STORAGE_COUNTERS:
            families[suffix] = counter(suffix, doc, "tier")
        for suffix, _, doc in (*_CACHE_COUNTERS, *_LOSS_COUNTERS):
            families[suffix] = counter(suffix, doc)
        return families


def _add(families: dict[str, Any], t: _Tracked, stats: StageStats) -> None:
    name, storage = t.name, t.storage_tier
    families["info"].add_metric([], t.info)
    families["samples"].add_metric([name], stats.samples)
    for stage in STAGES:
        families["stage"].add_metric([name, stage], stats.wall_s[stage])
        families["stage_cpu"].add_metric([name, stage], stats.cpu_s[stage])
    families["read"].add_metric([name, t.read_tier], stats.bytes_read)
    for kind, n in sorted(stats.errors.items()):
        families["errors"].add_metric([name, kind], n)
    counters = stats.counters
    # request and cache counters only where there are requests and a cache: a "file" tier with
    # zero requests would read as a measurement
    if t.remote or counters.requests is not None:
        requests = counters.requests or RequestCounts()
        for suffix, of_requests, _ in _STORAGE_COUNTERS:
            families[suffix].add_metric([name, storage], of_requests(requests))
        for kind, n in sorted(requests.faults.items()):
            families["faults"].add_metric([name, storage, kind], n)
    if t.cached or counters.cache is not None:
        cache, health = counters.cache or CacheStats(), counters.cache_health or CacheHealthCounts()
        for suffix, of_cache, _ in _CACHE_COUNTERS:
            families[suffix].add_metric([name], of_cache(cache, health))
    lost = counters.lost or LossCounts()
    for suffix, of_losses, _ in _LOSS_COUNTERS:  # zero is a finding too: nothing lost
        families[suffix].add_metric([name], of_losses(counters, lost))


class GpuCollector(Collector):
    """Utilisation, memory and PCIe throughput of each GPU, read from NVML when scraped."""

    def __init__(self, nvml: Nvml) -> None:
        self.nvml = nvml
        self.read_errors = 0

    def describe(self) -> Iterator:
        return iter(self._families().values())

    def collect(self) -> Iterator:
        families = self._families()
        try:
            samples = self.nvml.sample()
        except NvmlUnavailable:
            # a GPU that stops answering must not take the loader metrics down with it
            self.read_errors += 1
            samples = []
        for s in samples:
            gpu = [str(s.index)]
            families["util"].add_metric(gpu, s.utilization_pct / 100.0)
            families["used"].add_metric(gpu, s.memory_used_bytes)
            families["total"].add_metric(gpu, s.memory_total_bytes)
            if s.pcie_tx_bytes_per_s is not None:
                families["tx"].add_metric(gpu, s.pcie_tx_bytes_per_s)
            if s.pcie_rx_bytes_per_s is not None:
                families["rx"].add_metric(gpu, s.pcie_rx_bytes_per_s)
        families["errors"].add_metric([], self.read_errors)
        return iter(families.values())

    @staticmethod
    def _families() -> dict[str, Any]:
        def gauge(suffix: str, doc: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"iobench_gpu_{suffix}", doc, labels=["gpu"])

        return {
            "util": gauge("utilization_ratio", "Fraction of NVML's last sample period a kernel ran (0-1)."),
            "used": gauge("memory_used_bytes", "GPU memory allocated."),
            "total": gauge("memory_total_bytes", "GPU memory installed."),
            "tx": gauge("pcie_tx_bytes_per_second", "PCIe bytes/s from the GPU to the host (NVML, 20 ms)."),
            "rx": gauge("pcie_rx_bytes_per_second", "PCIe bytes/s from the host to the GPU (NVML, 20 ms)."),
            "errors": CounterMetricFamily(
                "iobench_gpu_read_errors", "Scrapes on which NVML could not be read."
            ),
        }


def serve_registry(registry: CollectorRegistry, port: int, addr: str = "0.0.0.0") -> Any:
    """Serve ``registry`` at http://addr:port/metrics from a daemon thread; returns the server
    (``server.server_port`` is the port bound, which port 0 picks)."""
    try:
        server, _thread = start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:
        raise OSError(
            exc.errno,
            f"cannot serve metrics on {addr}:{port}: {exc.strerror}; choose another port "
            "(several loaders share one port through LoaderExporter(port).track(loader, name=...))",
        ) from None
    return server


class LoaderExporter:
    """A /metrics endpoint for the loaders of this process, and for the GPUs when NVML is there.

    ``gpu``: None exports the GPUs when NVML is available; True requires them (NvmlUnavailable
    says why not); False never; an :class:`Nvml` session is used as it is (and left open).
    ``port=None`` starts no server: the metrics go to ``registry`` (for instance
    ``prometheus_client.REGISTRY``), which an endpoint of your own serves.
    """

    def __init__(
        self,
        port: int | None,
        addr: str = "0.0.0.0",
        *,
        registry: CollectorRegistry | None = None,
        gpu: bool | Nvml | None = None,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._loaders = LoaderCollector()
        self.registry.register(self._loaders)
        self._wait = Histogram(
            f"{PREFIX}_wait_seconds",
            "Seconds the training loop waited in next() for each batch.",
            ["loader"],
            buckets=WAIT_BUCKETS,
            registry=self.registry,
        )
        self._own_nvml = not isinstance(gpu, Nvml)
        self.nvml = _gpu_session(gpu)
        if self.nvml is not None:
            self.registry.register(GpuCollector(self.nvml))
        self._server = None
        if port is not None:
            try:
                self._server = serve_registry(self.registry, port, addr)
            except OSError:
                self.close()
                raise

    @property
    def port(self) -> int | None:
        return None if self._server is None else self._server.server_port

    def track(self, loader: Iterable, *, name: str = "train", tier: str | None = None) -> ExportedLoader:
        """Export ``loader`` (any iterable; a loaders backend adds its stats) as ``loader=name``."""
        self._loaders.track(name, loader, tier)
        return ExportedLoader(loader, self, self._wait.labels(loader=name))

    def close(self) -> None:
        """Stop serving (the port is free again) and end the NVML session this exporter opened."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self.nvml is not None and self._own_nvml:
            self.nvml.close()

    def __enter__(self) -> LoaderExporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _gpu_session(gpu: bool | Nvml | None) -> Nvml | None:
    if isinstance(gpu, Nvml):
        return gpu
    if gpu is None:
        return open_nvml()  # None where there is no GPU: the loader metrics alone
    return Nvml() if gpu else None  # asked for: NvmlUnavailable says why there is none


class ExportedLoader:
    """The loader, unchanged (its methods and attributes pass through), timed in ``next()``."""

    def __init__(self, loader: Iterable, exporter: LoaderExporter, wait: Any) -> None:
        self.loader, self.exporter, self._wait = loader, exporter, wait

    def __iter__(self) -> Iterator:
        it = iter(self.loader)
        try:
            while True:
                t0 = time.perf_counter()
                try:
                    batch = next(it)
                except StopIteration:
                    return
                self._wait.observe(time.perf_counter() - t0)
                yield batch
        finally:  # a loop that breaks early stops the loader's workers now, not at garbage collection
            close = getattr(it, "close", None)
            if close is not None:
                close()

    def __getattr__(self, attr: str) -> Any:
        # stats, set_epoch, state_dict, load_state_dict and anything backend-specific
        if attr == "loader":  # not set yet (copy, unpickle): no endless recursion
            raise AttributeError(attr)
        return getattr(self.loader, attr)


def exported(
    loader: Iterable,
    port: int,
    *,
    name: str = "train",
    tier: str | None = None,
    addr: str = "0.0.0.0",
    gpu: bool | Nvml | None = None,
) -> ExportedLoader:
    """``loader``, served at http://addr:port/metrics as ``loader=name`` (GPUs too, with NVML).
    ``.exporter.close()`` stops the server; ``.exporter.port`` is the port bound (0 picks one)."""
    return LoaderExporter(port, addr, gpu=gpu).track(loader, name=name, tier=tier)
