"""The NVIDIA DALI backend: decode and augment inside a DALI graph, on the GPU (nvJPEG) when present.

    from loaders.dali_loader import DaliLoader
    loader = DaliLoader(config)            # any object with LoaderConfig's attributes
    for batch in loader: ...               # loaders.Batch: images N x 3 x H x W uint8 channels_last

Three ways to get the encoded bytes into the graph (``config.options["mode"]``):

``reader``   DALI's ``fn.readers.webdataset`` on local/mounted shards, with the ``.idx`` beside
             each shard. Default for paths without a scheme (or ``file://``).
``external`` ``fn.external_source`` fed by *our* fetcher (:class:`loaders.sources.ShardSource`:
             concurrent ranged GETs, the shard cache, request counters) and
             :func:`loaders.tario.iter_samples`. Default for ``s3://`` and ``rados://``; works for
             any URL, and for ``objects=[(key, url, label)]``.
``dali-s3``  DALI's own reader on ``s3://`` shards and ``s3://`` index files (the AWS_* environment,
             ``AWS_ENDPOINT_URL`` included). A deliberately *naive* baseline: per the project's
             measurements it makes 1 HEAD per shard and 1 ranged GET per sample component, strictly
             one at a time, whatever ``num_threads`` or prefetch are. We cannot count DALI's internal
             requests, so only bytes (payload) and times are reported for it.

The graph: ``decoders.image_random_crop`` (fused ROI decode with RandomResizedCrop's parameters;
``device="mixed"`` = nvJPEG when a CUDA device is visible, else ``"cpu"`` with ``device_id=None``)
-> ``resize`` to ``augment.size`` -> random horizontal flip -> uint8 NHWC, handed to torch as an
N x 3 x H x W ``permute`` view (channels_last), as every other backend does. With
``config.normalize`` the flip and normalisation are fused into ``crop_mirror_normalize`` (float32).
Labels are parsed from the ASCII ``.cls`` member *inside the graph* to int64 (reader modes); the
external mode parses them on the host where the sample is read anyway.

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

Resume. Reader modes use DALI 2.x checkpointing (``enable_checkpointing=True``; the iterator's
``checkpoints()`` is stored in ``state_dict()`` and passed back as ``Pipeline(checkpoint=...)``);
verified in CPU mode. The external mode resumes by skipping the delivered samples of the epoch in
the (deterministic) feed, before decoding.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence

import torch

from .assemble import Batch
from .dali_feed import _Feed
from .decode import IMAGENET_MEAN, IMAGENET_STD, AugmentSpec
from .instrument import StageStats
from .shards import expand_urls, shards_for
from .sources import OBJECT_PROTOCOLS

INSTALL_HINT = "pip install 'iobench[dali]'  (or: pip install nvidia-dali-cuda130)"
MODES = ("auto", "reader", "external", "dali-s3")
STATE_VERSION = 1
LABEL_DIGITS = 9  # widest ASCII label the in-graph parser reads (fits int64 trivially)


class DaliPipelineError(RuntimeError):
    """DALI's pipeline failed (a corrupt image, a missing index...); names the shard when it can."""


def dali_available() -> bool:
    try:
        import nvidia.dali  # noqa: F401
    except ImportError:
        return False
    return True


def _dali():
    try:
        import nvidia.dali as dali
        import nvidia.dali.plugin.pytorch  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"the DALI loader needs NVIDIA DALI: {INSTALL_HINT} ({exc})") from exc
    return dali


def cuda_devices() -> int:
    """Number of CUDA devices DALI sees; 0 on a CPU-only box (a safe probe, no driver needed)."""
    from nvidia.dali import backend

    return int(backend.GetCUDADeviceCount())


def _protocol(url: str) -> str:
    return url.split("://", 1)[0] if "://" in url else "file"


def index_path(url: str) -> str:
    """``.../train-000000.tar`` -> ``.../train-000000.idx`` (works for s3:// too)."""
    stem = url[: -len(".tar")] if url.endswith(".tar") else url
    return stem + ".idx"


def _key_of(source_info: str, shard_paths: Sequence[str]) -> str:
    """DALI's source_info is ``<shard>:<data offset>:<member name>``; the key is webdataset's."""
    from .tario import split_key

    for path in shard_paths:
        if source_info.startswith(path + ":"):
            name = source_info[len(path) + 1 :].split(":", 1)[-1]
            return split_key(name)[0]
    return split_key(source_info.rsplit(":", 1)[-1])[0]


# -- the in-graph pieces ----------------------------------------------------------------------------


def parse_ascii_label(cls):
    """ASCII digits (``b"417"``, ``b"7\\n"``) -> int64, inside the graph: DALI's iterator needs a
    dense batch, and raw ``.cls`` bytes have different lengths. Non-digit bytes are ignored."""
    from nvidia.dali import fn, types

    padded = fn.pad(cls, axes=(0,), shape=(LABEL_DIGITS,), fill_value=0)
    value = types.Constant(0, dtype=types.INT64)
    for i in range(LABEL_DIGITS):
        c = fn.cast(padded[i], dtype=types.INT64)
        is_digit = fn.cast((c >= 48) & (c <= 57), dtype=types.INT64)
        value = value * (1 + 9 * is_digit) + (c - 48) * is_digit
    return value


def _augment(jpegs, spec: AugmentSpec, decode_device: str, normalize: bool, seed: int):
    from nvidia.dali import fn, types

    images = fn.decoders.image_random_crop(
        jpegs,
        device=decode_device,
        output_type=types.RGB,
        random_area=list(spec.scale),
        random_aspect_ratio=list(spec.ratio),
        num_attempts=10,
        seed=seed,
    )
    images = fn.resize(images, resize_x=spec.size, resize_y=spec.size, interp_type=types.INTERP_LINEAR)
    flip = fn.random.coin_flip(seed=seed + 1) if spec.flip else 0
    if normalize:
        return fn.crop_mirror_normalize(
            images,
            dtype=types.FLOAT,
            output_layout="HWC",
            mean=[255.0 * m for m in IMAGENET_MEAN],
            std=[255.0 * s for s in IMAGENET_STD],
            mirror=flip,
        )
    return fn.flip(images, horizontal=flip) if spec.flip else images


# -- the external-source feed -------------------------------------------------------------------------


def _find_corrupt(paths: Sequence[str], limit: int = 5) -> list[str]:
    """Post-mortem for a failed DALI reader: the members whose JPEG header does not parse."""
    import simplejpeg

    from .tario import iter_samples

    found: list[str] = []
    for path in paths:
        if _protocol(path) != "file":
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


# -- the loader ---------------------------------------------------------------------------------------


class DaliLoader:
    """DALI backend meeting the common loader contract (see the module docstring).

    ``config``: a ``loaders.contract.LoaderConfig`` (or any object with its attributes).
    ``config.options``: ``mode`` (auto/reader/external/dali-s3), ``fetchers`` (external mode:
    reader threads, default ``min(workers, shards)``), ``device_id`` (GPU index; default from
    ``config.device`` such as ``"cuda:1"``, else 0). DALI's ``num_threads`` = ``config.workers``.
    """

    def __init__(self, config, *, mode: str | None = None) -> None:
        _dali()
        self.config = config
        options = dict(getattr(config, "options", None) or {})
        self.options = options
        objects = getattr(config, "objects", None)
        self.objects = objects is not None
        self.items = list(objects) if self.objects else expand_urls(config.urls)
        if not self.items:
            raise ValueError("no shard URLs or sample objects given")
        mode = mode or options.get("mode", "auto")
        if mode not in MODES:
            raise ValueError(f"DALI mode {mode!r}: allowed values are {', '.join(MODES)}")
        if mode == "auto":
            remote = self.objects or any(
                _protocol(_url(i, self.objects)) in OBJECT_PROTOCOLS for i in self.items
            )
            # DALI's own reader opens files itself, past any throttle: throttled reads go through ours
            mode = "external" if remote or getattr(config, "throttle", None) else "reader"
        if mode in ("reader", "dali-s3") and getattr(config, "throttle", None):
            raise ValueError(
                f"DALI mode {mode!r} reads the shards itself and cannot be throttled; use mode='external'"
            )
        if self.objects and mode != "external":
            raise ValueError(f"objects=[(key, url, label)] needs the external mode, not {mode!r}")
        if mode == "reader" and any(_protocol(u) not in ("file",) for u in self.items):
            raise ValueError(
                "the reader mode reads local or mounted shards; use mode='external' or 'dali-s3'"
            )
        if mode == "dali-s3" and any(_protocol(u) != "s3" for u in self.items):
            raise ValueError("mode='dali-s3' reads s3:// shards only")
        self.mode = mode
        self.spec = config.pipeline_spec()
        self.source_spec = config.source_spec()
        self.num_threads = max(1, int(config.workers))
        device = getattr(config, "device", None)
        self.gpu = cuda_devices() > 0 and not (device and str(device).startswith("cpu"))
        if self.gpu:
            default_id = int(str(device).split(":", 1)[1]) if device and ":" in str(device) else 0
            self.device_id: int | None = int(options.get("device_id", default_id))
        else:
            self.device_id = None
        self.decode_device = "mixed" if self.gpu else "cpu"
        self.stats = StageStats()
        self._leftover = StageStats()
        self._epoch = 0
        self._active: int | None = None
        self._consumed = 0
        self._checkpoint: bytes | None = None
        self._resume: tuple[int, int] | None = None
        self._iterator = None
        self._pipe = None
        n_readers = len(shards_for(self.items, rank=config.rank, world_size=config.world_size, shuffle=False))
        self.fetchers = max(1, min(int(options.get("fetchers", self.num_threads)), n_readers))
        self._feed = _Feed(self.items, self.objects, self, self.fetchers) if mode == "external" else None

    # -- building ---------------------------------------------------------------------------------

    def _pipeline(self):
        from nvidia.dali import Pipeline, fn, types

        cfg, spec = self.config, self.spec
        pipe = Pipeline(
            batch_size=spec.batch_size,
            num_threads=self.num_threads,
            device_id=self.device_id,
            seed=spec.seed + 7919 * cfg.rank,
            prefetch_queue_depth=max(1, int(getattr(cfg, "prefetch", 2))),
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
                    _export_s3_env(self.source_spec.storage_options)
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
            images = _augment(jpegs, spec.augment, self.decode_device, bool(cfg.normalize), spec.seed)
            keys = fn.pad(keys, axes=(0,), fill_value=0)  # dense for the iterator; trimmed on the host
            outputs = [images, labels, keys] + ([nbytes] if nbytes is not None else [])
            pipe.set_outputs(*outputs)
        return pipe

    def _make_iterator(self):
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

    def set_epoch(self, epoch: int) -> None:
        """Choose the next epoch. The external mode reorders shards per epoch like the other
        backends; DALI's reader draws its own per-epoch order from its seed (the epoch number is
        recorded for ``state_dict`` but cannot steer it)."""
        if self._resume is not None and self._resume[0] != epoch:
            self._resume, self._checkpoint = None, None
        self._epoch = epoch

    def __iter__(self) -> Iterator[Batch]:
        epoch = self._epoch
        skip = self._resume[1] if self._resume and self._resume[0] == epoch else 0
        self._resume = None
        if self._feed is not None:
            self._feed.state.epoch, self._feed.state.skip = epoch, skip
        if self._iterator is None:
            self._iterator = self._make_iterator()  # prefetches at once: the feed's epoch is set
        else:
            self._iterator.reset()
        self._active, self._consumed, self._epoch = epoch, skip, epoch + 1
        try:
            yield from self._run()
        finally:
            self._active = None
            if self._feed is not None:
                self._feed.state.skip = 0

    def _run(self) -> Iterator[Batch]:
        shard_paths = sorted(self.items, key=len, reverse=True) if not self.objects else []
        fetch_cpu_seen = 0.0
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
            keys_u8 = out["keys"].numpy()
            if self._feed is not None:
                stats, keys = self._feed.state.stats.popleft()
                fetch_cpu = stats.cpu_s["fetch"]
                fetch_cpu_seen += fetch_cpu
            else:
                stats = StageStats()
                raw = [bytes(row).rstrip(b"\0").decode("utf-8", "replace") for row in keys_u8]
                keys = [_key_of(r, shard_paths) for r in raw]
                stats.bytes_read = int(out["nbytes"].sum())
                stats.samples = len(keys)
                fetch_cpu = 0.0
            stats.add_time("decode", wall, max(0.0, cpu - fetch_cpu))
            if self._leftover.samples or self._leftover.errors or self._leftover.bytes_read:
                stats.merge(self._leftover)
                self._leftover = StageStats()
            images = out["images"].permute(0, 3, 1, 2)  # NHWC storage = channels_last NCHW view
            labels = out["labels"].reshape(-1).to(torch.int64)
            self._consumed += len(keys)
            self.stats.merge(stats)
            yield Batch(images=images, labels=labels, keys=keys, stats=stats)
        if self._leftover.errors or self._leftover.bytes_read or self._leftover.counters:
            self.stats.merge(self._leftover)
            self._leftover = StageStats()

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
        """Where the loader stands. Reader modes add DALI's own checkpoint of the reader state."""
        epoch = self._active if self._active is not None else self._epoch
        consumed = self._consumed if self._active is not None else 0
        state = {"version": STATE_VERSION, "backend": "dali", "mode": self.mode, "epoch": epoch}
        state["consumed"] = consumed
        if self.mode != "external" and self._active is not None and self._iterator is not None:
            state["dali_checkpoint"] = self._iterator.checkpoints()[0]
        return state

    def load_state_dict(self, state: dict) -> None:
        if state.get("version") != STATE_VERSION or state.get("backend") != "dali":
            raise ValueError(f"not a DALI loader state (version {state.get('version')!r})")
        if state.get("mode") != self.mode:
            raise ValueError(f"state was saved in mode {state.get('mode')!r}, this loader is {self.mode!r}")
        if self._iterator is not None:
            raise RuntimeError("load_state_dict must come before the first iteration")
        self._epoch = int(state["epoch"])
        self._resume = (self._epoch, int(state.get("consumed", 0)))
        self._checkpoint = state.get("dali_checkpoint")

    def __len__(self) -> int:
        raise TypeError("the number of batches is known only to DALI's reader (epoch_size)")

    def close(self) -> None:
        self._iterator = None
        self._pipe = None
        for source in self._feed.sources if self._feed else []:
            source.close()


def _url(item, objects: bool) -> str:
    return item[1] if objects else item


def _export_s3_env(storage_options: dict) -> None:
    """DALI's S3 reader takes its endpoint and credentials from the AWS_* environment only."""
    client = storage_options.get("client_kwargs") or {}
    pairs = {
        "AWS_ENDPOINT_URL": storage_options.get("endpoint_url") or client.get("endpoint_url"),
        "AWS_ACCESS_KEY_ID": storage_options.get("key") or storage_options.get("aws_access_key_id"),
        "AWS_SECRET_ACCESS_KEY": storage_options.get("secret")
        or storage_options.get("aws_secret_access_key"),
        "AWS_REGION": client.get("region_name") or storage_options.get("region_name"),
    }
    for name, value in pairs.items():
        if value and not os.environ.get(name):
            os.environ[name] = str(value)
