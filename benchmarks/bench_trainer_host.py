"""Does the host-emulating accelerator deliver what a real trainer gets from a CPU loader?

Each round calibrates small_cnn on the CPU (`iobench calibrate`), then runs, in a rotating order, one
`iobench sweep` cell each of: the real small_cnn trainer, its emulated twin (`type: custom` at the
calibrated step's rate, `host_work: small_cnn`) and the sleep-only emulation DLIO uses
(`host_work: none`), fed by the torch loader at 1 and 2 workers. The figures are medians over
rounds; the ratios are medians of the per-round ratios against the real cell of the same round.
Goal: the twin within 15 % of the real cell at 1 and 2 workers.

    python benchmarks/bench_trainer_host.py [--rounds 3] [--batch 64] [--samples 1024] [--write]

Calibration and cells use a cache directory of their own (``IOBENCH_CACHE``), so the run neither
reads nor replaces this host's own calibration.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from common import REPO, host_line, paired, write_section

SECTION = "trainer-host"
KINDS = ("real", "twin", "sleep")


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "IOBENCH_CACHE": str(cache), "PYTHONPATH": str(REPO)}


def _calibrate(cache: Path, batch: int) -> float:
    """This round's small_cnn step alone, seconds."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "iobench.cli",
            "calibrate",
            *("--model", "small_cnn", "--device", "cpu"),
            "--batch-size",
            str(batch),
        ],
        check=True,
        capture_output=True,
        env=_env(cache),
    )
    from iobench.accelerators.hostcost import load_calibrations

    os.environ["IOBENCH_CACHE"] = str(cache)
    return next(
        c for c in load_calibrations() if c.model == "small_cnn" and c.batch_size == batch
    ).step_alone_s


def _accelerator(kind: str, rate: float) -> dict:
    if kind == "real":
        return {"kind": "torch", "model": "small_cnn"}
    return {
        "kind": "emulated",
        "type": "custom",
        "samples_per_s": round(rate, 1),
        "host_work": "small_cnn" if kind == "twin" else "none",
    }


def _cell(base: Path, cache: Path, dataset: Path, kind: str, workers: int, batch: int, rate: float, tag: str):
    """One cell through `iobench sweep`: its summary."""
    from iobench.results.api import load_summaries

    config = {
        "dataset": {"path": str(dataset)},
        "tiers": [{"kind": "local", "name": "local"}],
        "loaders": [{"kind": "torch", "workers": [workers], "batch_size": [batch], "shuffle_buffer": 0}],
        "accelerators": [_accelerator(kind, rate)],
        "run": {"cache": "warm", "epochs": 1, "min_measure": {"seconds": 6, "steps": 40}},
    }
    path = base / f"{tag}.yaml"
    path.write_text(yaml.safe_dump(config))
    out = base / tag
    subprocess.run(
        [sys.executable, "-m", "iobench.cli", "sweep", str(path), "--out", str(out), "--no-progress"],
        check=True,
        capture_output=True,
        env=_env(cache),
    )
    (summary,) = load_summaries(out)
    return summary


@dataclass
class Rounds:
    """Every round's figures per cell (kind, workers), and each round's calibrated step alone."""

    rate: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    slowdown: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    verdicts: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    alone: list[float] = field(default_factory=list)


def _parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--samples", type=int, default=1024)
    p.add_argument(
        "--write", action="store_true", help="replace this benchmark's section of docs/benchmarks.md"
    )
    return p.parse_args()


def _measure(args: argparse.Namespace) -> Rounds:
    """Each round: calibrate, then every cell once, in an order rotated by the round."""
    from iobench.datasets.synth import synthesize

    rounds = Rounds()
    contenders = [(k, w) for w in (1, 2) for k in KINDS]
    with tempfile.TemporaryDirectory(prefix="iobench-trainer-host-") as tmp:
        base = Path(tmp)
        cache = base / "cache"
        dataset = base / "ds"
        synthesize(dataset, samples=args.samples, seed=3, shard_bytes=12_000_000)
        for r in range(args.rounds):
            step = _calibrate(cache, args.batch)
            rounds.alone.append(step)
            order = contenders[r % len(contenders) :] + contenders[: r % len(contenders)]
            for kind, workers in order:
                s = _cell(
                    base,
                    cache,
                    dataset,
                    kind,
                    workers,
                    args.batch,
                    args.batch / step,
                    f"r{r}-{kind}-w{workers}",
                )
                rounds.rate.setdefault((kind, workers), []).append(s.metrics.samples_per_s)
                rounds.slowdown.setdefault((kind, workers), []).append(
                    s.metrics.trainer_slowdown or float("nan")
                )
                rounds.verdicts.setdefault((kind, workers), []).append(s.verdict.bound)
                print(
                    f"round {r} {kind} w{workers}: {s.metrics.samples_per_s:,.0f}/s, {s.verdict.bound}",
                    flush=True,
                )
    return rounds


def _table_rows(rounds: Rounds) -> list[str]:
    """Per worker count, every kind against the real cell of the same rounds; the twin judged."""
    lines = []
    for workers in (1, 2):
        real = rounds.rate[("real", workers)]
        for kind in KINDS:
            values = rounds.rate[(kind, workers)]
            ratio = paired(values, real)
            flag = (
                ""
                if kind != "twin"
                else (" (within 15 %)" if abs(ratio - 1) <= 0.15 else " (**not** within 15 %)")
            )
            cells = (
                str(workers),
                kind,
                f"{statistics.median(values):,.0f}",
                f"{ratio:.2f}{flag}",
                f"{statistics.median(rounds.slowdown[(kind, workers)]):.2f}",
                ", ".join(sorted(set(rounds.verdicts[(kind, workers)]))),
                ", ".join(f"{v:,.0f}" for v in values),
            )
            lines.append(f"| {' | '.join(cells)} |")
    return lines


def main() -> None:
    args = _parse_args()
    started = host_line()
    rounds = _measure(args)
    alone = rounds.alone
    lines = [
        f"## The trainer's host: real small_cnn against its emulated twins (`python benchmarks/bench_trainer_host.py --rounds {args.rounds}`)",
        "",
        f"Started {started}; ended {host_line()}. {args.samples} synthetic ImageNet-like JPEGs, local tier,",
        f"page cache warm, the torch loader, batch {args.batch}. Each round calibrates small_cnn on the CPU",
        f"(step alone, median over rounds {1000 * statistics.median(alone):.1f} ms; every round: "
        + ", ".join(f"{1000 * a:.1f}" for a in alone)
        + " ms), then runs every cell once in a rotating order. *twin*: emulated at the calibrated step's",
        "rate with `host_work: small_cnn`; *sleep*: the same rate, `host_work: none` (DLIO's emulation).",
        "Ratios: the median of the per-round ratios to the real cell. Goal: the twin within 15 %.",
        "",
        "| workers | cell | samples/s (median) | ÷ real | trainer slowdown (median) | verdicts | every round |",
        "|---:|---|---:|---:|---:|---|---|",
        *_table_rows(rounds),
    ]
    print("\n".join(lines))
    if args.write:
        write_section(SECTION, "\n".join(lines))


if __name__ == "__main__":
    main()
