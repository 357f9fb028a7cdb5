"""results.parquet, derived from the typed summary: one row per cell, one column per figure.

Every metric of :class:`~iobench.results.figures.PipelineMetrics` becomes a column of the same
name by itself, so adding a metric is one field there, its computation (iobench/analysis/) and its
definition in docs/method.md. The other columns are listed here with the attribute they read.
Describe every column in docs/method.md; bump ``SCHEMA_VERSION`` (summary.py) on any change a
reader of old results must know about. The version is in each Parquet file's metadata.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import pyarrow as pa

from loaders.observe import LoaderCounters

from .choices import CeilingPart
from .figures import ACCOUNT_PARTS, CacheState, EpochFigures, PipelineMetrics, StepAccount, Verdict
from .known import every_known
from .summary import SCHEMA_VERSION, CellSummary

VERSION_KEY = b"iobench_schema_version"


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    value: Callable[[CellSummary], Any]


def _ok(read: Callable[[CellSummary], Any]) -> Callable[[CellSummary], Any]:
    """A figure only a measured cell has: None for failed and interrupted cells."""
    return lambda s: read(s) if s.ok else None


def _counted(read: Callable[[LoaderCounters], Any]) -> Callable[[CellSummary], Any]:
    """A loader counter over the whole run, warm-up included: None where nothing of its group was
    counted (no object-store requests on a file tier, no cache)."""
    return _ok(lambda s: read(s.loader_stats_all_steps.counters))


def _expected(s: CellSummary) -> int | None:
    """What the completed epochs' plans deliver, where known (samples lost are counted against it)."""
    planned = every_known(e.expected_samples for e in s.epochs if e.epoch < s.epochs_completed)
    return sum(planned) if planned else None


def _first_epoch(s: CellSummary) -> EpochFigures | None:
    return s.epochs[0] if s.epochs else None


def _last_epoch(s: CellSummary) -> EpochFigures | None:
    return s.epochs[-1] if s.epochs else None


def _arrow_type(annotation: Any) -> pa.DataType:
    base = next((a for a in typing.get_args(annotation) if a is not type(None)), annotation)
    return {int: pa.int64(), float: pa.float64(), bool: pa.bool_(), str: pa.string()}[base]


def _metric_columns() -> list[Column]:
    hints = typing.get_type_hints(PipelineMetrics)
    return [Column(f.name, _arrow_type(hints[f.name]), _metric(f.name)) for f in fields(PipelineMetrics)]


def _metric(name: str) -> Callable[[CellSummary], Any]:
    return _ok(lambda s: getattr(s.metrics, name))


def _attribution(s: CellSummary, read: Callable) -> Any:
    return read(s.attribution) if s.attribution is not None else None


def _split(part: str) -> Callable[[CellSummary], Any]:
    return lambda s: getattr(s.split, part) if s.split is not None else None


def _capacity(read: Callable) -> Callable[[CellSummary], Any]:
    return lambda s: _attribution(s, lambda a: read(a.capacity) if a.capacity is not None else None)


def _ceiling(part: CeilingPart, read: Callable) -> Callable[[CellSummary], Any]:
    def value(s: CellSummary) -> Any:
        ceiling = getattr(s.ceilings, part) if s.ceilings is not None else None
        return read(ceiling) if ceiling is not None else None

    return value


def _stable(metric: str, read: Callable) -> Callable[[CellSummary], Any]:
    return lambda s: read(getattr(s.stability, metric)) if s.stability is not None else None


def _window(read: Callable) -> Callable[[CellSummary], Any]:
    return lambda s: read(s.window) if s.window is not None else None


def _mlperf(read: Callable) -> Callable[[CellSummary], Any]:
    return lambda s: read(s.mlperf) if s.mlperf is not None else None


def _ckpt(read: Callable) -> Callable[[CellSummary], Any]:
    """A checkpoint cell's figure (docs/method.md, Checkpoints); None for any other cell."""
    return lambda s: read(s.checkpoint) if s.ok and s.checkpoint is not None else None


def _ckpt_cost(read: Callable) -> Callable[[CellSummary], Any]:
    return _ckpt(lambda c: read(c.cost) if c.cost is not None else None)


def _dist(read: Callable) -> Callable[[CellSummary], Any]:
    return lambda s: read(s.distributed) if s.distributed is not None else None


SCALE_COLUMNS = (8, 64, 512, 4096)


def _at_scale(world: int, field: str) -> Callable[[CellSummary], Any]:
    def read(s: CellSummary) -> Any:
        point = next((p for p in s.scale if p.world_size == world), None)
        return getattr(point, field) if point else None

    return read


def _verdict(read: Callable[[Verdict], Any]) -> Callable[[CellSummary], Any]:
    # every ok summary has a verdict (cell/files.py and probe/publish.py write one); None without
    return _ok(lambda s: read(s.verdict) if s.verdict is not None else None)


def _cache_state(read: Callable[[CacheState], Any]) -> Callable[[CellSummary], Any]:
    # every ok summary has its cache state, as its verdict; None without
    return _ok(lambda s: read(s.cache_state) if s.cache_state is not None else None)


def _cores(read: Callable) -> Callable[[CellSummary], Any]:
    return _verdict(lambda v: read(v.cores) if v.cores is not None else None)


def _budget(part: str) -> Callable[[CellSummary], Any]:
    return _verdict(lambda v: getattr(v.budget, part) if v.budget is not None else None)


def _stage(name: str) -> Callable[[CellSummary], Any]:
    return _ok(lambda s: s.stage_ms_per_sample.get(name))


COLUMNS: list[Column] = [
    Column("cell_id", pa.string(), lambda s: s.cell_id),
    Column("status", pa.string(), lambda s: s.status),  # ok | failed | interrupted
    Column("tier", pa.string(), lambda s: s.cell.tier_name),
    Column("tier_kind", pa.string(), lambda s: s.cell.tier_kind),
    Column("client", pa.string(), lambda s: s.client),  # the object client the tier read through
    Column("loader", pa.string(), lambda s: s.cell.loader.kind),
    Column("workers", pa.int32(), lambda s: s.cell.loader.workers),
    Column("batch_size", pa.int32(), lambda s: s.cell.loader.batch_size),
    Column("accelerator", pa.string(), lambda s: s.cell.accelerator.name),
    Column("accelerator_count", pa.int32(), lambda s: s.cell.accelerator.count),
    Column("demand_samples_per_s", pa.float64(), _verdict(lambda v: v.demand_samples_per_s)),
    Column("cache_requested", pa.string(), lambda s: s.cell.cache),
    Column("cache_achieved", pa.string(), _cache_state(lambda c: c.achieved)),
    Column("resident_fraction_before", pa.float64(), _cache_state(lambda c: c.resident_fraction_before)),
    *_metric_columns(),
    # bytes/s the cell's processes caused to be read from block devices (docs/method.md)
    Column("device_read_bytes_per_s", pa.float64(), lambda s: s.device_read_bytes_per_s),
    Column("read_call_bytes_per_s", pa.float64(), lambda s: s.read_call_bytes_per_s),
    Column("cell_device_read_bytes", pa.int64(), lambda s: s.cell_device_read_bytes),
    Column("host_device_read_bytes_per_s", pa.float64(), lambda s: s.host_device_read_bytes_per_s),
    Column("gpu_utilization_pct", pa.float64(), lambda s: s.gpu_utilization_pct),
    *(
        Column(f"{stage}_ms_per_sample", pa.float64(), _stage(stage))
        for stage in ("fetch", "decode", "augment", "collate")
    ),
    Column("errors", pa.int64(), _ok(lambda s: sum(s.loader_stats_all_steps.errors.values()))),
    # samples lost (docs/method.md): the completed epochs' plans against what they delivered
    Column("samples_expected", pa.int64(), _ok(lambda s: _expected(s))),
    Column("samples_lost", pa.int64(), lambda s: s.losses.lost if s.losses else (0 if s.ok else None)),
    Column("lost_bytes", pa.int64(), _counted(lambda c: c.lost and c.lost.bytes)),
    Column("cache_damaged", pa.int64(), _counted(lambda c: c.cache and c.cache.damaged)),
    Column(
        "cache_bypassed_bytes",
        pa.int64(),
        _counted(lambda c: c.cache_health and c.cache_health.bypassed_bytes),
    ),
    Column("epochs", pa.int32(), lambda s: len(s.epochs)),
    Column("first_epoch_samples_per_s", pa.float64(), lambda s: (e := _first_epoch(s)) and e.samples_per_s),
    Column("last_epoch_samples_per_s", pa.float64(), lambda s: (e := _last_epoch(s)) and e.samples_per_s),
    Column(
        "first_epoch_cache_hit_ratio", pa.float64(), lambda s: (e := _first_epoch(s)) and e.cache_hit_ratio
    ),
    Column("last_epoch_cache_hit_ratio", pa.float64(), lambda s: (e := _last_epoch(s)) and e.cache_hit_ratio),
    Column("cache_evictions", pa.int64(), _counted(lambda c: c.cache and c.cache.evictions)),
    Column("requests", pa.int64(), _counted(lambda c: c.requests and c.requests.requests)),
    Column("retries", pa.int64(), _counted(lambda c: c.requests and c.requests.retries)),
    Column(
        "request_failures",
        pa.int64(),
        _counted(lambda c: c.requests and c.requests.failures),
    ),
    Column(
        "refused_connections",
        pa.int64(),
        _counted(lambda c: c.requests and c.requests.refused_connections),
    ),
    Column("outage_s", pa.float64(), _counted(lambda c: c.requests and c.requests.outage_s)),
    Column("request_p99_ms", pa.float64(), _ok(lambda s: s.loader_stats_all_steps.request_latency_ms.p99)),
    Column("warmup_steps", pa.int32(), lambda s: s.warmup.steps if s.warmup else None),
    Column("warmup_method", pa.string(), lambda s: s.warmup.method if s.warmup else None),
    # what the chosen repeat measured after its warm-up, against run.min_measure (analysis/window.py)
    Column("window_steps", pa.int64(), _window(lambda w: w.steps)),
    Column("window_s", pa.float64(), _window(lambda w: w.seconds)),
    Column("window_epochs", pa.int32(), _window(lambda w: w.epochs)),
    Column("window_added_epochs", pa.int32(), _window(lambda w: w.added_epochs)),
    Column("samples_per_s_rel_ci", pa.float64(), _window(lambda w: w.samples_per_s_rel_ci)),
    Column("au_rel_ci", pa.float64(), _window(lambda w: w.au_rel_ci)),
    Column("window_met", pa.bool_(), _window(lambda w: w.met)),
    # as MLPerf Storage reports it (analysis/mlperf.py): DLIO's AU per epoch, their mean against the
    # model's pass mark; MiB/s of the bytes really read
    Column("mlperf_au_mean", pa.float64(), _mlperf(lambda m: m.au_mean)),
    Column("mlperf_au_stdev", pa.float64(), _mlperf(lambda m: m.au_stdev)),
    Column("mlperf_au_threshold", pa.float64(), _mlperf(lambda m: m.threshold)),
    Column("mlperf_pass", pa.bool_(), _mlperf(lambda m: m.passed)),
    Column("mib_per_s", pa.float64(), _mlperf(lambda m: m.mib_per_s)),
    # false: samples read in full but not decoded; mlperf_mode: that, at MLPerf Storage's compute
    Column("decode", pa.bool_(), lambda s: s.cell.loader.decode),
    # the decode_roi setting, and the decoder the readers used (None: nothing decoded, or DALI's own)
    Column("decode_roi", pa.bool_(), lambda s: s.cell.loader.decode_roi),
    Column("decoder", pa.string(), lambda s: s.decoder),
    Column("mlperf_mode", pa.bool_(), lambda s: s.cell.mlperf_mode),
    Column("repeats", pa.int32(), _stable("samples_per_s", lambda r: r.n)),
    Column("samples_per_s_ci_low", pa.float64(), _stable("samples_per_s", lambda r: r.ci_low)),
    Column("samples_per_s_ci_high", pa.float64(), _stable("samples_per_s", lambda r: r.ci_high)),
    Column("au_ci_low", pa.float64(), _stable("au", lambda r: r.ci_low)),
    Column("au_ci_high", pa.float64(), _stable("au", lambda r: r.ci_high)),
    Column("unstable", pa.bool_(), lambda s: s.stability.unstable if s.stability is not None else None),
    Column("epoch_delta", pa.float64(), lambda s: s.epoch_delta),
    Column("epoch1_vs_steady", pa.float64(), lambda s: s.epoch1_vs_steady),
    Column("accelerator_ceiling", pa.float64(), _ceiling("accelerator", lambda c: c.samples_per_s)),
    Column("prep_ceiling", pa.float64(), _ceiling("prep", lambda c: c.samples_per_s)),
    Column("fetch_ceiling", pa.float64(), _ceiling("fetch", lambda c: c.samples_per_s)),
    Column("fetch_ceiling_bytes_per_s", pa.float64(), _ceiling("fetch", lambda c: c.bytes_per_s)),
    # accelerator | prep | fetch, with run.diagnose
    Column("differential_binding", pa.string(), lambda s: _attribution(s, lambda a: a.binding)),
    Column("methods_agree", pa.bool_(), lambda s: _attribution(s, lambda a: a.agree)),
    Column("prediction_error", pa.float64(), lambda s: _attribution(s, lambda a: a.prediction_error)),
    # the cores one accelerator takes (the verdict's, docs/method.md Cores per accelerator) and where the
    # window's cores went (The core budget)
    Column("cores_per_accelerator", pa.float64(), _cores(lambda c: c.per_accelerator)),
    Column("cores_fed_samples_per_s", pa.float64(), _cores(lambda c: c.samples_per_s)),
    Column("loader_cpu_ms_per_sample", pa.float64(), _cores(lambda c: c.loader_cpu_ms_per_sample)),
    Column("trainer_cpu_ms_per_sample", pa.float64(), _cores(lambda c: c.trainer_cpu_ms_per_sample)),
    *(
        Column(f"budget_{part}", pa.float64(), _budget(part))
        for part in ("trainer", "readers", "own", "others")
    ),
    Column("budget_usable", pa.int32(), _budget("usable")),
    # the wall split (docs/method.md): each part's share of the measured window's wall; they sum to 1
    *(Column(f"split_{part}", pa.float64(), _split(part)) for part in ACCOUNT_PARTS),
    Column("max_accelerators", pa.int32(), _capacity(lambda c: c.max_accelerators)),
    Column("capacity_confirmed", pa.bool_(), _capacity(lambda c: c.confirmed)),
    # ranks in the cell: run.nodes x run.ranks_per_node
    Column("world_size", pa.int32(), lambda s: s.cell.run.world_size),
    Column("nodes", pa.int32(), lambda s: s.cell.run.nodes),
    # fastest rank's samples/s over the slowest's (multi-rank cells)
    Column("rank_skew", pa.float64(), _dist(lambda d: d.skew)),
    Column("slowest_rank", pa.int32(), _dist(lambda d: d.slowest_rank)),
    Column("slowest_rank_host", pa.string(), _dist(lambda d: d.slowest_host)),
    Column("slowest_rank_samples_per_s", pa.float64(), _dist(lambda d: d.slowest_samples_per_s)),
    Column("rank_au_min", pa.float64(), lambda s: min((r.au for r in s.ranks), default=None)),
    Column("rank_au_max", pa.float64(), lambda s: max((r.au for r in s.ranks), default=None)),
    # synchronous multi-rank cells (run.sync): how the ranks' time divided, what peers cost
    Column("sync", pa.string(), _dist(lambda d: d.sync)),
    Column("interconnect", pa.string(), _dist(lambda d: d.interconnect)),
    Column("allreduce_ms", pa.float64(), _dist(lambda d: d.allreduce_ms)),
    Column("peer_wait_fraction", pa.float64(), _dist(lambda d: d.peer_wait_fraction)),
    Column("allreduce_fraction", pa.float64(), _dist(lambda d: d.allreduce_fraction)),
    Column("free_running_au", pa.float64(), _dist(lambda d: d.free_running_au)),
    Column("straggler_cost", pa.float64(), _dist(lambda d: d.straggler_cost)),
    Column("dropped_batches", pa.int64(), _dist(lambda d: d.dropped_batches)),
    # the synchronous AU predicted at W ranks from this cell's steps (analysis/scale.py)
    *(Column(f"predicted_au_{w}", pa.float64(), _at_scale(w, "au")) for w in SCALE_COLUMNS),
    *(
        Column(f"predicted_samples_per_s_{w}", pa.float64(), _at_scale(w, "samples_per_s"))
        for w in SCALE_COLUMNS
    ),
    # checkpoint cells (docs/method.md, Checkpoints)
    Column(
        "ckpt_destination",
        pa.string(),
        lambda s: s.cell.checkpoint.destination.name if s.cell.checkpoint else None,
    ),
    Column("ckpt_writer", pa.string(), _ckpt(lambda c: c.writer)),
    Column("ckpt_mode", pa.string(), lambda s: s.cell.checkpoint.mode if s.cell.checkpoint else None),
    Column(
        "ckpt_every_steps", pa.int32(), lambda s: s.cell.checkpoint.every_steps if s.cell.checkpoint else None
    ),
    Column(
        "ckpt_state_bytes", pa.int64(), lambda s: s.cell.checkpoint.state_bytes if s.cell.checkpoint else None
    ),
    Column("ckpt_saves", pa.int32(), _ckpt(lambda c: c.save.count)),
    Column("ckpt_save_gb_per_s_per_node", pa.float64(), _ckpt(lambda c: c.save.gb_per_s_per_node)),
    Column("ckpt_save_gb_per_s_per_rank", pa.float64(), _ckpt(lambda c: c.save.gb_per_s_per_rank)),
    Column("ckpt_save_s_mean", pa.float64(), _ckpt(lambda c: c.save.seconds_mean)),
    Column("ckpt_request_p50_ms", pa.float64(), _ckpt(lambda c: c.save.request_ms.p50)),
    Column("ckpt_request_p99_ms", pa.float64(), _ckpt(lambda c: c.save.request_ms.p99)),
    Column("ckpt_save_device_bytes", pa.int64(), _ckpt(lambda c: c.save.device_bytes)),
    Column(
        "ckpt_restore_cold_gb_per_s_per_node",
        pa.float64(),
        _ckpt(lambda c: c.restore_cold and c.restore_cold.gb_per_s_per_node),
    ),
    Column(
        "ckpt_restore_cold_s", pa.float64(), _ckpt(lambda c: c.restore_cold and c.restore_cold.seconds_mean)
    ),
    Column(
        "ckpt_restore_warm_gb_per_s_per_node",
        pa.float64(),
        _ckpt(lambda c: c.restore_warm and c.restore_warm.gb_per_s_per_node),
    ),
    Column(
        "ckpt_save_alone_gb_per_s_per_node",
        pa.float64(),
        _ckpt(lambda c: c.save_alone and c.save_alone.gb_per_s_per_node),
    ),
    Column("ckpt_fio_write_gb_per_s", pa.float64(), _ckpt(lambda c: c.fio_write_gb_per_s)),
    Column("ckpt_fio_read_gb_per_s", pa.float64(), _ckpt(lambda c: c.fio_read_gb_per_s)),
    Column("ckpt_blocked_s_per_save", pa.float64(), _ckpt_cost(lambda c: c.blocked_s_per_save)),
    Column("ckpt_blocked_fraction", pa.float64(), _ckpt_cost(lambda c: c.blocked_fraction)),
    Column("ckpt_slowed_steps", pa.int32(), _ckpt_cost(lambda c: c.slowed_steps)),
    Column("ckpt_slowed_step_ratio", pa.float64(), _ckpt_cost(lambda c: c.slowed_step_ratio)),
    Column("ckpt_au_with", pa.float64(), _ckpt_cost(lambda c: c.au_with)),
    Column("ckpt_au_without", pa.float64(), _ckpt_cost(lambda c: c.au_without)),
    Column("ckpt_cost", pa.float64(), _ckpt_cost(lambda c: c.cost)),
    Column("ckpt_verdict", pa.string(), _ckpt(lambda c: c.verdict)),
    Column("notes", pa.string(), lambda s: " | ".join(s.warnings) or None),
    # accelerator | host | prep | fetch | unknown | failed (and straggler | allreduce, multi-rank)
    Column("verdict", pa.string(), lambda s: s.verdict.bound if s.ok and s.verdict else "failed"),
    Column("binding_stage", pa.string(), lambda s: s.verdict.binding_stage if s.verdict else None),
    Column("headline", pa.string(), lambda s: s.verdict.headline if s.verdict else s.error),
    Column("error", pa.string(), lambda s: s.error),
]

RESULT_SCHEMA = pa.schema(
    [(c.name, c.type) for c in COLUMNS], metadata={VERSION_KEY: str(SCHEMA_VERSION).encode()}
)


def summary_to_row(summary: CellSummary) -> dict:
    """One cell's summary as a results.parquet row."""
    return {c.name: c.value(summary) for c in COLUMNS}


def with_version(schema: pa.Schema) -> pa.Schema:
    return schema.with_metadata({VERSION_KEY: str(SCHEMA_VERSION).encode()})


STEP_SCHEMA = with_version(
    pa.schema(
        [
            ("cell_id", pa.string()),
            ("step", pa.int32()),
            ("epoch", pa.int32()),
            ("warmup", pa.bool_()),
            ("t_start", pa.float64()),
            ("wait_s", pa.float64()),
            ("h2d_s", pa.float64()),
            ("compute_s", pa.float64()),
            ("t_end", pa.float64()),
            ("samples", pa.int32()),
            ("bytes_read", pa.int64()),
            ("rank", pa.int32()),  # times of a multi-rank cell's ranks count from one barrier
            ("peer_wait_s", pa.float64()),  # synchronous cells: waiting for the slowest rank
            ("allreduce_s", pa.float64()),  # synchronous cells: the modelled exposed all-reduce
            ("device_s", pa.float64()),  # the device's time for the step (v6+)
            ("compute_draw_s", pa.float64()),  # emulated: the device time drawn for the step (v7+)
            ("trainer_cpu_s", pa.float64()),  # the trainer process's CPU over the step (v6+)
            ("reader", pa.int32()),  # the loader worker that made the batch
            ("begun_s", pa.float64()),  # when that worker began making it (null: not stamped)
            ("ready_s", pa.float64()),  # when it had made it
            ("fetch_wait_s", pa.float64()),  # what making it waited for its samples' bytes
            # reads made ahead of the pipeline: each sample's asked for, and its bytes in (null: none)
            ("read_asked_s", pa.list_(pa.float64())),
            ("read_in_s", pa.list_(pa.float64())),
            ("open_s", pa.float64()),  # of wait_s: the epoch's opening (v8+)
            ("decode_s", pa.float64()),  # the batch's readers' wall in decode, augment, collate (v8+)
            ("augment_s", pa.float64()),
            ("collate_s", pa.float64()),
            ("reader_cpu_s", pa.float64()),  # the CPU its readers spent making it (v8+)
            ("checkpoint_s", pa.float64()),  # blocked saving a checkpoint after the step (v9+)
            # the step's account (analysis/ledger.py, v8+): from the rank's previous step's end to
            # this step's end, each second in one part; the parts sum to account_span_s
            ("account_start_s", pa.float64()),
            ("account_span_s", pa.float64()),
            *((f"account_{part}_s", pa.float64()) for part in ACCOUNT_PARTS),
        ]
    )
)


def account_columns(entry: StepAccount) -> dict[str, float]:
    """A step's account as its steps.parquet columns."""
    return {
        "account_start_s": entry.start_s,
        "account_span_s": entry.span_s,
        **{f"account_{part}_s": getattr(entry, part) for part in ACCOUNT_PARTS},
    }


TELEMETRY_SCHEMA = with_version(
    pa.schema(
        [
            ("cell_id", pa.string()),
            ("t", pa.float64()),
            ("cpu_percent", pa.list_(pa.float64())),
            ("mem_used_bytes", pa.int64()),
            ("mem_available_bytes", pa.int64()),
            ("disk_read_bytes", pa.string()),  # JSON: cumulative bytes read per block device
            ("process_read_bytes", pa.int64()),  # cumulative, the cell's processes (v5+)
            ("process_read_chars", pa.int64()),
            # per GPU, where NVML is there (v6+): utilisation %, memory used, PCIe bytes/s
            ("gpu_utilization_pct", pa.list_(pa.float64())),
            ("gpu_memory_used_bytes", pa.list_(pa.int64())),
            ("gpu_pcie_tx_bytes_per_s", pa.list_(pa.float64())),
            ("gpu_pcie_rx_bytes_per_s", pa.list_(pa.float64())),
        ]
    )
)

# <cell>/keys.parquet, with run.record_keys: every delivered sample, warm-up steps included
KEYS_SCHEMA = with_version(
    pa.schema([("rank", pa.int32()), ("epoch", pa.int32()), ("step", pa.int32()), ("key", pa.string())])
)
