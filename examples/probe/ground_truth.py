"""The probe against ground truth: each job's loader alone and step alone measured apart (the
training script's --alone flag, no probe), and the same job probed with --ceilings, in interleaved
rounds; then, with --sweep, the sweep file the probe wrote run with iobench's own loader.

    python examples/probe/make_tree.py /tmp/probe-tree
    python examples/probe/ground_truth.py /tmp/probe-tree --rounds 3 [--jobs decode slow compute] [--sweep]

Prints one line per job: the probe's verdict (and whether its two ceilings agree), its measured
samples/s, each ceiling against the rate measured apart (median of the rounds; within 25 % is the
aim), and with --sweep the sweep's verdict on the generated file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = str(HERE / "train_images.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
JOBS = {
    "decode": (["--workers", "1", "--batch-size", "32", "--model", "tiny"], False),
    "slow": (["--workers", "2", "--batch-size", "16", "--model", "tiny", "--store-ms", "40"], False),
    "compute": (["--workers", "2", "--batch-size", "8", "--model", "wide"], False),
    "decode-spawn": (
        ["--workers", "1", "--batch-size", "32", "--model", "tiny", "--context", "spawn"],
        False,
    ),
    "slow-forkserver": (
        [
            "--workers",
            "2",
            "--batch-size",
            "16",
            "--model",
            "tiny",
            "--store-ms",
            "40",
            "--context",
            "forkserver",
        ],
        False,
    ),
    "decode-ddp": (["--workers", "1", "--batch-size", "16", "--model", "tiny", "--ddp"], True),
}


def command(tree: Path, job: str, *extra: str) -> list[str]:
    flags, ddp = JOBS[job]
    launcher = TORCHRUN if ddp else [sys.executable]
    return [*launcher, SCRIPT, str(tree), *flags, *extra]


def apart(tree: Path, job: str, what: str) -> float:
    """Samples/s of the job's loader or step alone, as the script measures it (every rank's, summed)."""
    out = subprocess.run(
        command(tree, job, "--alone", what, "--seconds", "6"), capture_output=True, text=True, check=True
    )
    # ranks print at once: their lines may run together
    rates = [json.loads(found)["samples_per_s"] for found in re.findall(r"\{[^{}]*\}", out.stdout)]
    return sum(rates)


def probe(tree: Path, job: str, out: Path) -> dict:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "iobench.cli",
            "probe",
            "--out",
            str(out),
            "--ceilings",
            "--",
            *command(tree, job),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    from iobench.results.api import load_summaries

    (s,) = load_summaries(out)
    assert s.verdict is not None and s.metrics is not None, s.error  # a probed job that ran has both
    step_alone = s.ceilings.accelerator if s.ceilings else None
    loader = s.ceilings.loader if s.ceilings else None
    return {
        "verdict": s.verdict.name,
        "agree": s.attribution.agree if s.attribution else None,
        "measured": s.metrics.samples_per_s,
        "step": step_alone.samples_per_s if step_alone else None,
        "loader": loader.samples_per_s if loader else None,
        "loader_part": loader.name if loader else None,
    }


def swept(out: Path, tree: Path) -> str:
    """The verdict of the sweep the probe wrote, its dataset packed from the tree."""
    dataset = out / "dataset"
    if not (dataset / "manifest.json").exists():
        subprocess.run(
            [sys.executable, "-m", "iobench.cli", "dataset", "pack", str(tree), "--out", str(dataset)],
            check=True,
            capture_output=True,
        )
    run = out / "sweep-run"
    subprocess.run(
        [sys.executable, "-m", "iobench.cli", "sweep", str(out / "sweep.yaml"), "--out", str(run)],
        capture_output=True,
        text=True,
    )
    from iobench.results.api import load_summaries

    return "; ".join(
        f"{s.cell.tier_name}: {s.verdict.name if s.ok and s.verdict else f'{s.status} ({s.error})'}"
        for s in load_summaries(run)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tree", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", nargs="+", default=["decode", "slow", "compute"], choices=sorted(JOBS))
    ap.add_argument("--sweep", action="store_true", help="also run the sweep file each probe wrote")
    args = ap.parse_args()
    # one intra-op thread: on a small host shared with other jobs, a step split over two threads waits a
    # scheduler's time slice whenever one of them is preempted, and its time says more about the
    # neighbours than about the job
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    scratch = Path(tempfile.mkdtemp(prefix="probe-truth-"))
    results: dict[str, dict[str, list]] = {job: {} for job in args.jobs}
    for r in range(args.rounds):
        for i, job in enumerate(args.jobs):
            # each round runs the three in a rotating order: a spell of load hits them alike
            tasks = ["loader", "step", "probe"]
            k = (r + i) % 3
            for task in tasks[k:] + tasks[:k]:
                if task == "probe":
                    found = probe(args.tree, job, scratch / f"{job}-{r}")
                    for key, value in found.items():
                        results[job].setdefault(key, []).append(value)
                else:
                    results[job].setdefault(f"{task}_apart", []).append(apart(args.tree, job, task))
            print(job, {k: v[-1] for k, v in results[job].items()}, flush=True)
    print()
    for job, res in results.items():

        def med(key: str, res: dict = res) -> float | None:
            values = [v for v in res.get(key, []) if v is not None]
            return statistics.median(values) if values else None

        step, step_apart, loader, loader_apart = (
            med("step"),
            med("step_apart"),
            med("loader"),
            med("loader_apart"),
        )
        line = (
            f"{job}: verdicts {sorted(set(res['verdict']))}, methods agree {res['agree']}; measured {med('measured'):,.0f}/s; "
            f"step alone {step:,.0f}/s vs {step_apart:,.0f}/s apart ({step / step_apart - 1:+.0%}); "
            f"loader alone ({res['loader_part'][0]}) {loader:,.0f}/s vs {loader_apart:,.0f}/s apart "
            f"({loader / loader_apart - 1:+.0%})"
        )
        if args.sweep:
            line += f"; swept: {swept(scratch / f'{job}-0', args.tree)}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
