"""Does a one-rank cell predict its synchronous 2- and 3-rank twins, with and without loader workers?
(docs/scale-out.md)

One sweep per round over a tier whose latency has a tail (a throttled local tier: lognormal request
latency, median 5 ms, p99 150 ms, one request per object), one object per sample, batch 8, an
emulated accelerator of 200 samples/s per rank (with no host work of its own unless
``--host-work`` names a model: then three ranks' trainers contend for this host's 2 cores with the
loaders' workers, which the model does not take in), ``loaders[].workers`` 0, 1 and 2 (a worker's queue
absorbs part of the tail while its rank waits for its peers: the model replays it) and
``run.ranks_per_node`` 1, 2 and 3 in step (``sync: allreduce``). Each round: every multi-rank
cell's measured synchronous AU against the AU its one-rank twin (same workers) predicted for its
world size. Rounds are medianed; the errors of every round are written too, and each round's
checks are appended to ``--log`` as they come (JSON lines).

    python benchmarks/bench_sync_scaling.py --rounds 3 [--workers 0,1,2] [--ranks 1,2,3] [--host-work none]
        [--compute-cv CV] [--log LOG] [--write]
    python benchmarks/bench_sync_scaling.py --table-from LOG [LOG...] --write
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from common import host_line, write_section

from iobench.analysis.queue import LoaderQueue
from iobench.analysis.scale import ScaleCheck, predict_at_scale, production, replay_queue, scale_checks
from iobench.results.api import load_summaries, step_rows

SECTION = "sync-scaling"
DEFAULT_HOST_WORK = "resnet50"
# what the prediction replays: rows logged before the bytes read ahead were stamped replayed the
# loader's queue alone
MODEL, QUEUE_ALONE = "queue + bytes read ahead", "queue alone"


def _dataset(base: Path) -> Path:
    from iobench.datasets.objects import explode
    from iobench.datasets.synth import synthesize

    out = base / "ds"
    synthesize(out, samples=1024, seed=11, shard_bytes=1_000_000)
    explode(out)
    return out


def _round(
    base: Path, dataset: Path, i: int, workers: list[int], ranks: list[int], cv: float, host_work: str
) -> list[dict]:
    """One sweep; a row per multi-rank cell: its check against its one-rank twin, the production
    drift between them, and the AU the cell's own batches predict for it (the model alone)."""
    config = {
        "dataset": {"path": str(dataset)},
        "tiers": [
            {
                "kind": "throttled",
                "name": "tail",
                "inner": {"kind": "local", "path": str(dataset)},
                "latency_ms": 5,
                "latency_p99_ms": 150,
            }
        ],
        "loaders": [
            {"kind": "torch", "workers": workers, "batch_size": [8], "shuffle_buffer": 8, "layout": "objects"}
        ],
        "accelerators": [
            {
                "kind": "emulated",
                "type": "custom",
                "samples_per_s": 200,
                "host_work": host_work,
                **({"compute": {"dist": "gamma", "cv": cv}} if cv else {}),
            }
        ],
        "run": {"ranks_per_node": ranks, "warmup_steps": 2, "epochs": 3, "cache": "warm", "seed": i},
    }
    path = base / f"round{i}.yaml"
    path.write_text(yaml.safe_dump(config))
    out = base / f"round{i}"
    subprocess.run(
        [sys.executable, "-m", "iobench.cli", "sweep", str(path), "--out", str(out), "--no-progress"],
        check=True,
        capture_output=True,
    )
    summaries = {s.cell_id: s for s in load_summaries(out)}
    return [
        {
            "round": i,
            "workers": _workers_of(c),
            "compute_cv": cv,
            "host_work": host_work,
            "model": MODEL,
            **c.__dict__,
            "production_ratio": _drift(out, c),
            "own_au": next(p.au for p in summaries[c.cell_id].scale if p.world_size == c.world_size),
            **_on_this_host(out, c),
        }
        for c in scale_checks(list(summaries.values()))
    ]


def _drift(out: Path, c: ScaleCheck) -> float:
    """Mean batch production time in the multi-rank cell over its one-rank twin's: what the model
    takes as given (independent ranks, each with the CPU it had when measured), as it came out."""
    queue = LoaderQueue(_workers_of(c), 2)

    def mean_made(cell_id: str) -> float:
        rows = [r for r in step_rows(out, cell_id) if not r.warmup]
        return float(production(rows, replay_queue(rows, queue)).made.mean())

    return mean_made(c.cell_id) / mean_made(c.predicted_from)


def _on_this_host(out: Path, c: ScaleCheck) -> dict:
    """The fabric this host gave the multi-rank cell: its collective's own cost per step (the wait
    in the step's collective of the rank that arrived last, which waited for no peer: gloo over
    loopback, and the scheduling of every rank's processes on shared cores), and the prediction of
    the one-rank twin with that cost as the exposed all-reduce in place of the modelled fabric's."""
    rows = [r for r in step_rows(out, c.cell_id) if not r.warmup]
    by_step: dict[int, list[float]] = {}
    for r in rows:
        by_step.setdefault(r.step, []).append(r.peer_wait_s)
    collective = statistics.mean(min(w) for w in by_step.values() if len(w) == c.world_size)
    twin = step_rows(out, c.predicted_from)
    queue = replay_queue([r for r in twin if not r.warmup], LoaderQueue(_workers_of(c), 2))
    (point,) = predict_at_scale(
        twin, lambda world, compute: collective, queue=queue, world_sizes=(c.world_size,)
    )
    return {"collective_s": collective, "predicted_on_host_au": point.au}


def _workers_of(c: ScaleCheck) -> int:
    """The loader workers of a check's cell (its id names them: ``-w2``)."""
    return int(re.search(r"-w(\d+)", c.cell_id).group(1))  # type: ignore[union-attr]


def _measure(args: argparse.Namespace) -> list[dict]:
    workers = [int(w) for w in args.workers.split(",")]
    ranks = [int(r) for r in args.ranks.split(",")]
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="iobench-sync-") as tmp:
        base = Path(tmp)
        dataset = _dataset(base)
        for i in range(args.first_round, args.first_round + args.rounds):
            found = _round(base, dataset, i, workers, ranks, args.compute_cv, args.host_work)
            rows += found
            if args.log:
                with args.log.open("a") as f:
                    f.writelines(json.dumps(row) + "\n" for row in found)
    return rows


def _parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--first-round",
        type=int,
        default=0,
        help="number (and seed) of the first round: to add rounds to a log",
    )
    p.add_argument("--workers", default="0,1,2", help="loader workers per rank, one cell each")
    p.add_argument("--ranks", default="1,2,3", help="ranks per cell (1 is the twin that predicts)")
    p.add_argument(
        "--compute-cv",
        type=float,
        default=0.0,
        help="the emulated compute drawn per step (gamma, this cv; 0: a constant)",
    )
    p.add_argument(
        "--host-work",
        default="none",
        help="the emulated trainer's host work per step (none: the loader's queue alone is checked; "
        "a model: its calibrated or default CPU work, which ranks sharing this host's 2 cores contend for)",
    )
    p.add_argument("--log", type=Path, help="append each round's rows here (JSON lines)")
    p.add_argument(
        "--table-from",
        type=Path,
        nargs="+",
        help="make the table from these --log files instead of measuring",
    )
    p.add_argument(
        "--write", action="store_true", help="replace this benchmark's section of docs/benchmarks.md"
    )
    return p.parse_args()


def _by_point(rows: list[dict]) -> dict[tuple[str, float, str, int, int], list[dict]]:
    """The rounds' rows of each table row: host work, compute cv, model, workers, world size."""
    by_point: dict[tuple[str, float, str, int, int], list[dict]] = {}
    for row in rows:
        # rows logged before --host-work ran with the accelerator's default: resnet50's host work
        key = (
            row.get("host_work", DEFAULT_HOST_WORK),
            row.get("compute_cv", 0.0),
            row.get("model", QUEUE_ALONE),
            row["workers"],
            row["world_size"],
        )
        by_point.setdefault(key, []).append(row)
    return by_point


def _errors(found: list[dict], key: str) -> list[float]:
    """Each round's prediction ``key`` against the measured AU, in percent."""
    return [100 * (row[key] / row["measured_au"] - 1) for row in found]


def _pct(values: list[float]) -> str:
    return ", ".join(f"{v:+.1f} %" for v in values)


def _preamble(args: argparse.Namespace) -> list[str]:
    """The section's title, host line, method and the table's head."""
    return [
        "## Synchronous scaling: predicted from one rank, measured at 2 and 3, with loader workers",
        "",
        host_line()
        + (" (when the table was made from the logged rounds, not when they ran)" if args.table_from else ""),
        "",
        f"`python benchmarks/bench_sync_scaling.py --rounds N --workers {args.workers} --ranks {args.ranks} "
        "--log LOG` (the table: `--table-from LOG... --write`): a throttled local tier with a latency tail "
        "(lognormal, median 5 ms, p99 150 ms per object), one object per sample, torch loader with 0, 1 or 2 "
        "workers per rank (prefetch 2), batch 8, an emulated accelerator of 200 samples/s per rank "
        "(its compute a constant, or with `--compute-cv CV` drawn per step from a gamma of that cv; "
        "*host work*: the CPU work per step it does beside its device time, `--host-work`, none by "
        "default; rows logged before the option ran with the accelerator's default, resnet50's), 3 "
        "epochs of 1,024 samples, `sync: allreduce` on `ib-ndr-400` (ResNet-50's all-reduce is fully "
        "hidden at this compute). Each round predicts the multi-rank cells from the one-rank cell with "
        "the same workers, replaying its batches through the loader's queue (docs/scale-out.md); "
        "*model*: `queue + bytes read ahead` replays also when the bytes each batch's reader read ahead "
        "of it were in (one object per sample, 4 reads in flight), `queue alone` is the rounds logged "
        "before those were stamped; a row's rounds are its errors listed.",
        "",
        "*On this host's collective*: the same prediction with the exposed all-reduce set to what the "
        "multi-rank cell's collective itself cost per step on this host (the wait in the collective of "
        "the rank that arrived last, which waited for no peer: gloo over loopback and the scheduling "
        "of every rank's processes on 2 shared cores; its median in the next column) in place of the "
        "modelled fabric's, which ResNet-50's all-reduce on `ib-ndr-400` hides entirely: the model "
        "takes the fabric's cost as an input, and this host's fabric is not the one it was given.",
        "",
        "*Own batches*: the AU the multi-rank cell's own measured batches predict for it (the same model "
        "and bootstrap, the one-rank cell's production times replaced by the cell's own): the model's "
        "error alone. *Production drift*: the multi-rank cell's mean batch production time over the "
        "one-rank cell's (with the bytes read ahead replayed: the making with those bytes in). The model takes the one-rank figure for every rank (each rank's workers with "
        "the CPU they had alone); where the drift is off 1, so is the prediction. Both are listed for "
        "the rounds that recorded them (rounds logged before they existed show – or fewer figures).",
        "",
        "| host work | compute cv | model | workers | ranks | measured AU (median) | predicted AU (median) | error, median | error, every round "
        "| on this host's collective: error, median (every round) | collective, ms (median) "
        "| own batches: error, median (every round) | production drift, every round |",
        "|---|---:|---|---:|---:|---:|---:|---:|---|---|---:|---|---|",
    ]


def _table_row(point: tuple[str, float, str, int, int], found: list[dict]) -> str:
    """One point's rounds: the medians and every round's errors; – where no round recorded a figure."""
    host_work, cv, model, w, world = point
    predicted = _errors(found, "predicted_au")
    own = _errors([row for row in found if row.get("own_au") is not None], "own_au")
    hosted = [row for row in found if row.get("predicted_on_host_au") is not None]
    on_host = _errors(hosted, "predicted_on_host_au")
    return (
        f"| {host_work} | {cv:g} | {model} | {w} | {world} | {statistics.median(row['measured_au'] for row in found):.3f} | "
        f"{statistics.median(row['predicted_au'] for row in found):.3f} | "
        f"{statistics.median(predicted):+.1f} % | {_pct(predicted)} | "
        + (f"{statistics.median(on_host):+.1f} % ({_pct(on_host)})" if on_host else "–")
        + " | "
        + (f"{1000 * statistics.median(row['collective_s'] for row in hosted):.1f}" if hosted else "–")
        + " | "
        + (f"{statistics.median(own):+.1f} % ({_pct(own)})" if own else "–")
        + " | "
        # rows logged before the drift was recorded have none
        + ", ".join(f"{row['production_ratio']:.2f}" if "production_ratio" in row else "–" for row in found)
        + " |"
    )


def main() -> None:
    args = _parse_args()
    if args.table_from:
        rows = [json.loads(line) for path in args.table_from for line in path.read_text().splitlines()]
    else:
        rows = _measure(args)
    # no host work first, then the current model, then by point
    points = sorted(_by_point(rows).items(), key=lambda kv: (kv[0][0] != "none", kv[0][2] != MODEL, kv[0]))
    text = "\n".join(_preamble(args) + [_table_row(point, found) for point, found in points])
    print(text)
    if args.write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
