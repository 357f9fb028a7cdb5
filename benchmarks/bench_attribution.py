"""Attribution against ground truth.

    python benchmarks/bench_attribution.py [--samples 3072] [--caps 10,20,40]

1. Throttled ground truth: the local dataset behind a throttled tier capped at each of ``--caps``
   MB/s (all well below what decode can consume here), diagnosed cold with 2 workers. The fetch
   ceiling (bytes/s) must match the configured cap (goal: within ±5 %), and both the differential
   and the online method must name fetch.
2. Overhead: the same torch DataLoader (2 workers, page cache warm) with the stage clocks on and
   off, interleaved rounds, medians; and the CPU time per sample in one process, on and off.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
from common import host_line, loaders_dataset, write_section

from iobench.cell.entry.process import run_cell
from iobench.results.spec import AcceleratorSpec, CellSpec, LoaderSettings, RunSettings
from iobench.results.summary import CellSummary


def throttled_cell(root: Path, cap_mb: float, out: Path) -> CellSummary:
    cell = CellSpec(
        cell_id=f"throttled-{cap_mb:g}MBps",
        tier={"kind": "throttled", "name": "throttled", "inner": {"kind": "local", "path": str(root)},
              "bandwidth": f"{cap_mb:g}MB/s"},
        loader=LoaderSettings(kind="torch", workers=2, batch_size=64, prefetch=2, shuffle_buffer=256,
                              layout="shards"),
        accelerator=AcceleratorSpec(kind="emulated", type="h100", model="resnet50", demand="training", count=1),
        cache="cold",
        run=RunSettings(warmup_steps="auto", epochs=1, on_error="skip", seed=0, timeout_s=900, repeats=1,
                        diagnose=True),
        dataset=str(root),
    )  # fmt: skip
    return run_cell(cell, out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=3072)
    ap.add_argument("--caps", default="10,20,40", help="MB/s, comma-separated")
    args = ap.parse_args()
    root, urls = loaders_dataset(args.samples)

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for cap in (float(c) for c in args.caps.split(",")):
            s = throttled_cell(root, cap, Path(tmp))
            assert s.ceilings is not None and s.attribution is not None and s.verdict is not None, s.error
            fetch, prep, a = s.ceilings.fetch, s.ceilings.prep, s.attribution
            assert fetch is not None and fetch.bytes_per_s is not None and prep is not None
            error = fetch.bytes_per_s / (cap * 1e6) - 1
            steps = pq.read_table(Path(tmp) / s.cell.cell_id / "steps.parquet").column("t_end")
            whole_run = s.loader_stats_all_steps.bytes_read / steps[-1].as_py()
            rows.append(
                f"| {cap:g} MB/s | {fetch.bytes_per_s / 1e6:.2f} MB/s | {100 * error:+.1f} % "
                f"| {whole_run / 1e6:.2f} MB/s | {prep.samples_per_s:,.0f} "
                f"| {a.binding} | {s.verdict.bound} | {'yes' if a.agree else 'no'} |"
            )
            print(rows[-1])

    write_section(
        "attribution",
        f"""## Attribution against throttled ground truth (`python benchmarks/bench_attribution.py`)

{host_line()}. {args.samples} ImageNet-like samples (~110 KB JPEGs) in {len(urls)} shards.

**Ground truth.** The local dataset behind the `throttled` tier at each cap, cold, torch
DataLoader with 2 workers, an emulated H100 (7,000 samples/s), `iobench diagnose`. *Fetch ceiling*:
the differential method's fetch-only readers; *error*: fetch ceiling ÷ cap − 1 (goal ±5 %);
*read/s*: what the full pipeline read over its whole run (all bytes ÷ time from building the
loader to the last step: a measured window alone would also count bytes that shuffle buffers read
before it); *prep ceiling*: samples/s from RAM, for
scale (each cap is well below it); *binding* / *online*: the differential and the per-stage verdicts.

| cap | fetch ceiling | error | read/s, whole run | prep ceiling | binding | online | agree |
|---|---:|---:|---:|---:|---|---|---|
{chr(10).join(rows)}
""",
    )


if __name__ == "__main__":
    main()
