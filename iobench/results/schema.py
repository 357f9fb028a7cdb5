"""The result schema: one summary.json per cell and one row per cell in results.parquet.

Bump SCHEMA_VERSION on any change that a reader of old results must know about, and describe the
columns in docs/method.md.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 3  # 3: multi-rank cells (world_size .. rank_au_max; steps.parquet rank)

RESULT_SCHEMA = pa.schema(
    [
        ("cell_id", pa.string()),
        ("status", pa.string()),  # ok | failed | interrupted
        ("tier", pa.string()),
        ("tier_kind", pa.string()),
        ("loader", pa.string()),
        ("workers", pa.int32()),
        ("batch_size", pa.int32()),
        ("accelerator", pa.string()),
        ("accelerator_count", pa.int32()),
        ("demand_samples_per_s", pa.float64()),
        ("cache_requested", pa.string()),
        ("cache_achieved", pa.string()),
        ("resident_fraction_before", pa.float64()),
        ("steps", pa.int32()),
        ("samples", pa.int64()),
        ("wall_s", pa.float64()),
        ("samples_per_s", pa.float64()),
        ("bytes_per_s", pa.float64()),
        ("device_read_bytes_per_s", pa.float64()),
        ("au", pa.float64()),
        ("au_mlperf", pa.float64()),
        ("stall_fraction", pa.float64()),
        ("wait_p50_ms", pa.float64()),
        ("wait_p95_ms", pa.float64()),
        ("wait_p99_ms", pa.float64()),
        ("time_to_first_batch_s", pa.float64()),
        ("fetch_ms_per_sample", pa.float64()),
        ("decode_ms_per_sample", pa.float64()),
        ("augment_ms_per_sample", pa.float64()),
        ("collate_ms_per_sample", pa.float64()),
        ("errors", pa.int64()),
        ("epochs", pa.int32()),
        ("first_epoch_samples_per_s", pa.float64()),
        ("last_epoch_samples_per_s", pa.float64()),
        ("first_epoch_cache_hit_ratio", pa.float64()),
        ("last_epoch_cache_hit_ratio", pa.float64()),
        ("cache_evictions", pa.int64()),
        ("requests", pa.int64()),
        ("retries", pa.int64()),
        ("request_failures", pa.int64()),
        ("request_p99_ms", pa.float64()),
        ("warmup_steps", pa.int32()),
        ("warmup_method", pa.string()),
        ("repeats", pa.int32()),
        ("samples_per_s_ci_low", pa.float64()),
        ("samples_per_s_ci_high", pa.float64()),
        ("au_ci_low", pa.float64()),
        ("au_ci_high", pa.float64()),
        ("unstable", pa.bool_()),
        ("epoch_delta", pa.float64()),
        ("epoch1_vs_steady", pa.float64()),
        ("accelerator_ceiling", pa.float64()),
        ("prep_ceiling", pa.float64()),
        ("fetch_ceiling", pa.float64()),
        ("fetch_ceiling_bytes_per_s", pa.float64()),
        ("differential_binding", pa.string()),  # accelerator | prep | fetch, with run.diagnose
        ("methods_agree", pa.bool_()),
        ("prediction_error", pa.float64()),
        ("lost_fetch", pa.float64()),
        ("lost_decode", pa.float64()),
        ("lost_augment", pa.float64()),
        ("lost_collate", pa.float64()),
        ("lost_h2d", pa.float64()),
        ("max_accelerators", pa.int32()),
        ("capacity_confirmed", pa.bool_()),
        ("world_size", pa.int32()),  # ranks in the cell: run.nodes x run.ranks_per_node
        ("nodes", pa.int32()),
        ("rank_skew", pa.float64()),  # fastest rank's samples/s over the slowest's (multi-rank cells)
        ("slowest_rank", pa.int32()),
        ("slowest_rank_host", pa.string()),
        ("slowest_rank_samples_per_s", pa.float64()),
        ("rank_au_min", pa.float64()),
        ("rank_au_max", pa.float64()),
        ("notes", pa.string()),
        ("verdict", pa.string()),  # accelerator | prep | fetch | unknown | failed
        ("binding_stage", pa.string()),
        ("headline", pa.string()),
        ("error", pa.string()),
    ]
)

STEP_SCHEMA = pa.schema(
    [
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
    ]
)

# <cell>/keys.parquet, with run.record_keys: every delivered sample, warm-up steps included
KEYS_SCHEMA = pa.schema(
    [("rank", pa.int32()), ("epoch", pa.int32()), ("step", pa.int32()), ("key", pa.string())]
)


def summary_to_row(summary: dict) -> dict:
    """Flatten one cell's summary.json into a results.parquet row."""
    cell = summary.get("cell", {})
    m = summary.get("metrics") or {}
    v = summary.get("verdict") or {}
    cache = summary.get("cache_state") or {}
    stages = summary.get("stage_ms_per_sample") or {}
    acc = cell.get("accelerator", {})
    epochs = summary.get("epochs") or [{}]
    counters = (summary.get("loader_stats_all_steps") or {}).get("counters") or {}
    latency = (summary.get("loader_stats_all_steps") or {}).get("request_latency_ms") or {}
    acc_name = acc.get("type") if acc.get("kind") == "emulated" else f"torch:{acc.get('model')}"
    stability = summary.get("stability") or {}
    sps, au = stability.get("samples_per_s") or {}, stability.get("au") or {}
    ceilings = summary.get("ceilings") or {}
    attribution = summary.get("attribution") or {}
    lost = attribution.get("lost_fraction") or {}
    cap = attribution.get("capacity") or {}
    run = cell.get("run") or {}
    nodes = run.get("nodes", 1)
    dist = summary.get("distributed") or {}
    ranks = summary.get("ranks") or []
    return {
        "cell_id": cell.get("cell_id"),
        "status": summary.get("status"),
        "tier": cell.get("tier", {}).get("name"),
        "tier_kind": cell.get("tier", {}).get("kind"),
        "loader": cell.get("loader", {}).get("kind"),
        "workers": cell.get("loader", {}).get("workers"),
        "batch_size": cell.get("loader", {}).get("batch_size"),
        "accelerator": acc_name,
        "accelerator_count": acc.get("count"),
        "demand_samples_per_s": v.get("demand_samples_per_s"),
        "cache_requested": cell.get("cache"),
        "cache_achieved": cache.get("achieved"),
        "resident_fraction_before": cache.get("resident_fraction_before"),
        "steps": m.get("steps"),
        "samples": m.get("samples"),
        "wall_s": m.get("wall_s"),
        "samples_per_s": m.get("samples_per_s"),
        "bytes_per_s": m.get("bytes_per_s"),
        "device_read_bytes_per_s": summary.get("device_read_bytes_per_s"),
        "au": m.get("au"),
        "au_mlperf": m.get("au_mlperf"),
        "stall_fraction": m.get("stall_fraction"),
        "wait_p50_ms": m.get("wait_p50_ms"),
        "wait_p95_ms": m.get("wait_p95_ms"),
        "wait_p99_ms": m.get("wait_p99_ms"),
        "time_to_first_batch_s": m.get("time_to_first_batch_s"),
        "fetch_ms_per_sample": stages.get("fetch"),
        "decode_ms_per_sample": stages.get("decode"),
        "augment_ms_per_sample": stages.get("augment"),
        "collate_ms_per_sample": stages.get("collate"),
        "errors": sum((summary.get("loader_stats_all_steps") or {}).get("errors", {}).values()),
        "epochs": len(summary.get("epochs") or []),
        "first_epoch_samples_per_s": epochs[0].get("samples_per_s"),
        "last_epoch_samples_per_s": epochs[-1].get("samples_per_s"),
        "first_epoch_cache_hit_ratio": epochs[0].get("cache_hit_ratio"),
        "last_epoch_cache_hit_ratio": epochs[-1].get("cache_hit_ratio"),
        "cache_evictions": counters.get("cache_evictions"),
        "requests": counters.get("requests"),
        "retries": counters.get("retries"),
        "request_failures": counters.get("request_failures"),
        "request_p99_ms": latency.get("p99"),
        "warmup_steps": (summary.get("warmup") or {}).get("steps"),
        "warmup_method": (summary.get("warmup") or {}).get("method"),
        "repeats": sps.get("n"),
        "samples_per_s_ci_low": sps.get("ci_low"),
        "samples_per_s_ci_high": sps.get("ci_high"),
        "au_ci_low": au.get("ci_low"),
        "au_ci_high": au.get("ci_high"),
        "unstable": (sps.get("unstable") or au.get("unstable")) if stability else None,
        "epoch_delta": summary.get("epoch_delta"),
        "epoch1_vs_steady": summary.get("epoch1_vs_steady"),
        "accelerator_ceiling": (ceilings.get("accelerator") or {}).get("samples_per_s"),
        "prep_ceiling": (ceilings.get("prep") or {}).get("samples_per_s"),
        "fetch_ceiling": (ceilings.get("fetch") or {}).get("samples_per_s"),
        "fetch_ceiling_bytes_per_s": (ceilings.get("fetch") or {}).get("bytes_per_s"),
        "differential_binding": attribution.get("binding"),
        "methods_agree": attribution.get("agree"),
        "prediction_error": attribution.get("prediction_error"),
        "lost_fetch": lost.get("fetch"),
        "lost_decode": lost.get("decode"),
        "lost_augment": lost.get("augment"),
        "lost_collate": lost.get("collate"),
        "lost_h2d": lost.get("h2d"),
        "max_accelerators": cap.get("max_accelerators"),
        "capacity_confirmed": cap.get("confirmed"),
        "world_size": nodes * run.get("ranks_per_node", 1),
        "nodes": nodes,
        "rank_skew": dist.get("skew"),
        "slowest_rank": dist.get("slowest_rank"),
        "slowest_rank_host": dist.get("slowest_host"),
        "slowest_rank_samples_per_s": dist.get("slowest_samples_per_s"),
        "rank_au_min": min((r["au"] for r in ranks), default=None),
        "rank_au_max": max((r["au"] for r in ranks), default=None),
        "notes": " | ".join(summary.get("warnings") or []) or None,
        "verdict": v.get("bound") if summary.get("status") == "ok" else "failed",
        "binding_stage": v.get("binding_stage"),
        "headline": v.get("headline") or summary.get("error"),
        "error": summary.get("error"),
    }
