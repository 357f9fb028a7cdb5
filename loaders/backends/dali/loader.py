"""The DALI backend: decode and augment inside a DALI graph, on the GPU (nvJPEG) when present.

    from loaders.backends.dali import DaliLoader
    loader = DaliLoader(config)            # a LoaderConfig; or make_loader("dali", config)
    for batch in loader: ...               # loaders.Batch: images N x 3 x H x W uint8 channels_last

Three ways to get the encoded bytes into the graph (``config.options["mode"]``):

``reader``   DALI's ``fn.readers.webdataset`` on local/mounted shards, with the ``.idx`` beside
             each shard. Default for paths without a scheme (or ``file://``).
``external`` ``fn.external_source`` fed by *our* fetcher (feed.py: concurrent ranged GETs, the
             shard cache, request counters) and :func:`loaders.formats.tar.iter_samples`. Default for
             ``s3://`` and ``rados://``; works for any URL, and for ``objects=[(key, url, label)]``.
``dali-s3``  DALI's own reader on ``s3://`` shards and ``s3://`` index files (the AWS_* environment,
             ``AWS_ENDPOINT_URL`` included). A deliberately *naive* baseline: per the project's
             measurements it makes 1 HEAD per shard and 1 ranged GET per sample component, strictly
             one at a time, whatever ``num_threads`` or prefetch are. We cannot count DALI's internal
             requests, so only bytes (payload) and times are reported for it.

The graph is graph.py's; its uint8 NHWC output reaches torch as an N x 3 x H x W ``permute`` view
(channels_last), as every other backend's. Labels are parsed from the ASCII ``.cls`` member *inside
the graph* to int64 (reader modes); the external mode parses them on the host where the sample is
read anyway.

Stage times. DALI decodes, augments and batches inside its own threads, so the per-stage split of
the other backends does not exist here. ``stats`` reports: ``fetch`` = our fetcher's read time
(external mode only; DALI's reader reads inside the graph and is part of ``decode``); ``decode`` =
the DALI pipeline's run time: wall = the time the consumer spent in DALI's ``next()`` (a lower bound
when prefetching hides work), CPU = process CPU time consumed meanwhile minus the consumer thread's
own and the fetch threads' (i.e. DALI's worker threads: decode + augment + collate). ``augment``
and ``collate`` stay 0.

Errors. A corrupt image makes DALI's decoder fail the whole pipeline; there is no per-sample
"skip" inside DALI's reader. The failure is re-raised as :class:`DaliPipelineError` naming the
shard(s) (found by checking the JPEG headers of the loader's shards). The external mode validates
each JPEG header with simplejpeg before DALI sees it, so ``on_error="skip"`` skips and counts
corrupt samples exactly like the other backends.

Resume. Through the skeleton's epoch cursor (loaders.backends.BaseLoader; one stream: the graph's
output).
Reader modes also keep DALI 2.x's checkpoint of its reader (``enable_checkpointing=True``; the
iterator's ``checkpoints()`` is stored in ``state_dict()`` and passed back as
``Pipeline(checkpoint=...)``); verified in CPU mode. The external mode resumes the feed from its
state after the last batch delivered (its fetchers' shard cursors, the shuffle buffer).
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING

import torch

from loaders.backends.dali.feed import Feed
from loaders.backends.dali.graph import (
    augment_graph,
    cuda_devices,
    export_s3_env,
    import_dali,
    parse_ascii_label,
    protocol,
)
from loaders.backends.skeleton import BaseLoader
from loaders.formats.base import local_path
from loaders.formats.tar_index import index_path
from loaders.observe.stages import StageStats
from loaders.pipeline.batch import Batch, Bookkeeping
from loaders.storage.layers import OBJECT_PROTOCOLS

if TYPE_CHECKING:
    from nvidia.dali.pipeline import Pipeline
    from nvidia.dali.plugin.pytorch import DALIGenericIterator  # DALI is imported when a loader is built


class DaliPipelineError(RuntimeError):
    """DALI's pipeline failed (a corrupt image, a missing index...); names the shard when it can."""


def _key_of(source_info: str, shard_paths: Sequence[str]) -> str:
    """DALI's source_info is ``<shard>:<data offset>:<member name>``; the key is webdataset's."""
    from loaders.formats.tar import split_key

    for path in shard_paths:
        if source_info.startswith(path + ":"):
            name = source_info[len(path) + 1 :].split(":", 1)[-1]
            return split_key(name)[0]
    return split_key(source_info.rsplit(":", 1)[-1])[0]


def _find_corrupt(paths: Sequence[str], limit: int = 5) -> list[str]:
    """Post-mortem for a failed DALI reader: the members whose JPEG header does not parse."""
    import simplejpeg

    from loaders.formats.tar import iter_samples

    found: list[str] = []
    for path in paths:
        if protocol(path) != "file":
            continue
        try:
            with open(path.removeprefix("file://"), "rb") as f:
                for sample in iter_samples(f, path):
                    data = next((sample.parts[e] for e in ("jpg", "jpeg") if e in sample.parts), None)
                    if data is None:
                        continue
                    try:
                        simplejpeg.decode_jpeg_header(data)
                    except ValueError:
                        found.append(f"{path}: sample {sample.key!r} (tar offset {sample.offset})")
                        if len(found) >= limit:
                            return found
        except (OSError, ValueError) as exc:
            found.append(f"{path}: {exc}")
    return found


def _choose_mode(mode: str, items: list, objects: bool, throttled: bool) -> str:
    """``auto`` resolved, and a mode that cannot read these items refused with the reason."""
    urls = [item[1] if objects else item for item in items]
    if mode == "auto":
        remote = objects or any(protocol(u) in OBJECT_PROTOCOLS for u in urls)
        # DALI's own reader opens files itself, past any throttle: throttled reads go through ours
        mode = "external" if remote or throttled else "reader"
    if mode in ("reader", "dali-s3") and throttled:
        raise ValueError(
            f"DALI mode {mode!r} reads the shards itself and cannot be throttled; use mode='external'"
        )
    if objects and mode != "external":
        raise ValueError(f"objects=[(key, url, label)] needs the external mode, not {mode!r}")
    if mode == "reader" and any(protocol(u) != "file" for u in urls):
        raise ValueError("the reader mode reads local or mounted shards; use mode='external' or 'dali-s3'")
    if mode == "dali-s3" and any(protocol(u) != "s3" for u in urls):
        raise ValueError("mode='dali-s3' reads s3:// shards only")
    return mode


def _index_samples(urls: Sequence[str]) -> int | None:
    """The samples of the shards from their DALI index files (first line ``v1.2 <samples>``)."""
    total = 0
    for url in urls:
        path = local_path(index_path(url))
        if path is None:
            return None
        try:
            with open(path, encoding="ascii") as f:
                _version, count = f.readline().split()
        except (OSError, ValueError):
            return None
        total += int(count)
    return total


class DaliLoader(BaseLoader):
    """DALI backend meeting the common loader contract (see the module docstring).

    ``config.options`` (declared in the registry): ``mode`` (auto/reader/external/dali-s3),
    ``fetchers`` (external mode: reader threads, default ``min(workers, shards)``), ``device_id``
    (GPU index; default from ``config.device`` such as ``"cuda:1"``, else 0). DALI's
    ``num_threads`` = ``config.workers``. ``set_epoch`` reorders the shards per epoch in the
    external mode, like the other backends; DALI's reader draws its own per-epoch order from its
    seed (the epoch is recorded for ``state_dict`` but cannot steer it).
    """

    backend = "dali"
    merged = True  # the fetchers' samples meet in one shuffle buffer: the graph's output is one stream

    def _readers(self) -> int | None:
        """External mode: the fetcher threads that split the rank's epoch; the reader modes split
        it inside DALI (no plan)."""
        import_dali()
        cfg, objects = self.config, self.config.layout == "objects"
        self.num_threads = max(1, int(cfg.workers))
        throttled = cfg.source.throttle is not None
        for extra in ("augment_cpu_ms", "decode_cpu_ms"):
            if getattr(cfg.pipeline, extra):
                raise ValueError(
                    f"{extra}={getattr(cfg.pipeline, extra):g}: DALI decodes and augments inside its own graph, "
                    "which has no CPU work of the user's to add; use a loader of kind torch, thread or nodes"
                )
        self.mode = _choose_mode(cfg.options["mode"], self.items, objects, throttled)
        if self.mode != "external":
            assert cfg.world_size is not None  # the skeleton resolved the ranks (with_ranks)
            if cfg.remainder == "pad" and cfg.world_size > 1:
                raise ValueError(
                    f"DALI mode {self.mode!r} splits the samples over ranks itself (ranks differ by at "
                    "most one sample and its iterator gives every rank the same number of batches); "
                    "remainder='pad' needs mode='external'"
                )
            return None
        share = len(self.plan(0, readers=1).readers[0].items)
        return max(1, min(cfg.options["fetchers"] or self.num_threads, share))

    def _build(self) -> None:
        device = self.config.device
        self.gpu = cuda_devices() > 0 and not (device and str(device).startswith("cpu"))
        self.device_id: int | None = None
        if self.gpu:
            default_id = int(str(device).split(":", 1)[1]) if device and ":" in str(device) else 0
            chosen = self.config.options["device_id"]
            self.device_id = chosen if chosen is not None else default_id
        self.decode_device = "mixed" if self.gpu else "cpu"
        self._checkpoint: bytes | None = None
        self._iterator: DALIGenericIterator | None = None
        self._pipe: Pipeline | None = None
        self._feed: Feed | None = None
        if self.mode == "external":
            assert self.readers is not None  # external mode's readers are its fetchers (_readers)
            self._feed = Feed(self.config, fetchers=self.readers, plan=self.plan)

    # -- building ---------------------------------------------------------------------------------

    def _pipeline(self):
        from nvidia.dali import Pipeline, fn, types

        cfg, spec = self.config, self.spec
        pipe = Pipeline(
            batch_size=spec.batch_size,
            num_threads=self.num_threads,
            device_id=self.device_id,
            seed=spec.seed + 7919 * cfg.rank,
            prefetch_queue_depth=max(1, int(cfg.prefetch)),
            enable_checkpointing=self.mode != "external",
            checkpoint=self._checkpoint if self.mode != "external" else None,
            exec_dynamic=True,
        )
        with pipe:
            if self.mode == "external":
                jpegs, labels, keys = fn.external_source(
                    source=self._feed,
                    num_outputs=3,
                    batch=True,
                    cycle="raise",
                    dtype=[types.UINT8, types.INT64, types.UINT8],
                )
                nbytes = None
            else:
                if self.mode == "dali-s3":
                    export_s3_env(cfg.source.storage_options)
                jpegs, cls = fn.readers.webdataset(
                    paths=self.items,
                    index_paths=[index_path(u) for u in self.items],
                    ext=["jpg", "cls"],
                    missing_component_behavior="error",
                    shard_id=cfg.rank,
                    num_shards=cfg.world_size,
                    random_shuffle=spec.shuffle_buffer > 1,
                    initial_fill=max(1, spec.shuffle_buffer),
                    seed=spec.seed,
                    name="Reader",
                )
                labels = parse_ascii_label(cls)
                keys = fn.get_property(jpegs, key="source_info")
                nbytes = fn.cast(jpegs.shape()[0] + cls.shape()[0], dtype=types.INT64)
            images = augment_graph(
                jpegs, spec.augment, self.decode_device, bool(cfg.normalize), spec.seed, spec.decode_roi
            )
            keys = fn.pad(keys, axes=(0,), fill_value=0)  # dense for the iterator; trimmed on the host
            outputs = [images, labels, keys] + ([nbytes] if nbytes is not None else [])
            pipe.set_outputs(*outputs)
        return pipe

    def _make_iterator(self) -> DALIGenericIterator:
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

        names = ["images", "labels", "keys"] + ([] if self.mode == "external" else ["nbytes"])
        self._pipe = self._pipeline()
        self._pipe.build()
        policy = LastBatchPolicy.DROP if self.spec.drop_last else LastBatchPolicy.PARTIAL
        return DALIGenericIterator(
            [self._pipe],
            names,
            reader_name=None if self.mode == "external" else "Reader",
            last_batch_policy=policy,
            auto_reset=False,
        )

    # -- the contract -----------------------------------------------------------------------------

    def _epoch(self, epoch: int, resumed: list[dict | None] | None) -> Generator[Batch, None, None]:
        if resumed is None:
            self._checkpoint = None  # a saved reader position belongs to another epoch
        if self._feed is not None:
            self._feed.start(epoch, None if resumed is None else resumed[0])
        if self._iterator is None:
            self._iterator = self._make_iterator()  # prefetches at once: the feed's epoch is set
        else:
            self._iterator.reset()
        shard_paths = sorted(self.items, key=len, reverse=True) if self._feed is None else []
        while True:
            w0, p0, t0 = time.perf_counter(), time.process_time(), time.thread_time()
            try:
                out = next(self._iterator)[0]
            except StopIteration:
                break
            except RuntimeError as exc:
                raise self._explain(exc) from exc
            wall = time.perf_counter() - w0
            cpu = (time.process_time() - p0) - (time.thread_time() - t0)
            resume = None
            if self._feed is not None:
                fed = self._feed.pending.popleft()
                stats, keys, resume = fed.stats, fed.keys, fed.resume
                fetch_cpu = stats.cpu_s["fetch"]
            else:
                stats = StageStats()
                raw = [bytes(row).rstrip(b"\0").decode("utf-8", "replace") for row in out["keys"].numpy()]
                keys = [_key_of(r, shard_paths) for r in raw]
                stats.bytes_read = int(out["nbytes"].sum())
                stats.samples = len(keys)
                fetch_cpu = 0.0
            stats.add_time("decode", wall, max(0.0, cpu - fetch_cpu))
            images = out["images"].permute(0, 3, 1, 2)  # NHWC storage = channels_last NCHW view
            labels = out["labels"].reshape(-1).to(torch.int64)
            yield Batch(images, labels, keys, bookkeeping=Bookkeeping(stats, resume=resume))
        if self._feed is not None:  # a dropped tail's bytes and errors still count
            self.stats.merge(self._feed.take_leftover())

    def _deliver(self, batch: Batch) -> Batch:
        return batch  # on the graph's device already, normalised there when asked

    def _explain(self, exc: RuntimeError) -> DaliPipelineError:
        message = str(exc).strip().splitlines()
        head = " | ".join(line for line in message[:3] if line)
        if self.mode == "external":
            where = "a sample from the external source (its JPEG header parsed but the data did not decode)"
        else:
            found = _find_corrupt(self.items)
            where = "; ".join(found) if found else "the shard is not named by DALI; no corrupt header found"
        return DaliPipelineError(
            f"DALI pipeline failed (mode {self.mode}, on_error has no per-sample skip inside DALI's "
            f"reader): {where}. DALI said: {head}"
        )

    def state_dict(self) -> dict:
        """The shared cursor's state; reader modes add DALI's own checkpoint of the reader."""
        state = {**super().state_dict(), "mode": self.mode}
        if self.mode != "external" and self._cursor.active is not None and self._iterator is not None:
            state["dali_checkpoint"] = self._iterator.checkpoints()[0]
        return state

    def load_state_dict(self, state: dict) -> None:
        if state.get("mode") != self.mode:
            raise ValueError(f"state was saved in mode {state.get('mode')!r}, this loader is {self.mode!r}")
        if self._iterator is not None:
            raise RuntimeError("load_state_dict must come before the first iteration")
        super().load_state_dict(state)
        self._checkpoint = state.get("dali_checkpoint")

    def __len__(self) -> int:
        """The batches this rank yields per epoch, the same on every rank. External mode: from the
        even split (loaders.plan); reader modes: DALI's own rule (its iterator gives every shard
        ``ceil(ceil(N / ranks) / batch)`` batches, or ``(N // ranks) // batch`` with drop_last),
        N read from the shards' .idx files."""
        if self.mode == "external":
            return super().__len__()
        total = _index_samples(self.items)
        if total is None:
            raise TypeError(
                "len() in DALI's reader modes needs the shards' .idx files on a local path (DALI reads "
                "the epoch size from them); use mode='external' with shard_samples for s3:// shards"
            )
        ranks, batch = self.config.world_size, self.spec.batch_size
        assert ranks is not None  # the skeleton resolved the ranks (with_ranks)
        if self.spec.drop_last:
            return (total // ranks) // batch
        per_rank = -(-total // ranks)
        return -(-per_rank // batch)

    def close(self) -> None:
        self._iterator = None
        self._pipe = None
        if self._feed is not None:
            self._feed.close()
