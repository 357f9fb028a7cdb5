"""What `iobench probe` costs the job it measures: the same plain PyTorch job run probed and not, in
interleaved rounds, compared on the job's own samples/s (timed by the job after its first steps).

    python benchmarks/bench_probe_overhead.py [--rounds 8] [--steps 300] [--write]

Three ways to run each job, once per round in a rotating order (so a spell of load on this shared
host hits them alike):

- `plain`: the job alone;
- `hooks`: the job with the probe's sitecustomize loaded and recording (every next(), every worker
  batch, flushed to its files), nobody following the records;
- `probe`: the whole `iobench probe --then continue` around it, with a window that never closes, so
  the probe follows the records (and samples NVML where there is a GPU) for the whole job: the most a
  probe costs.

Two jobs: `images`, JPEGs decoded with PIL in one worker and a tiny model (examples/probe, the
decode-bound ground truth, about ten steps a second); `fast`, in-memory samples from two workers and
a step of a millisecond or so (hundreds of steps a second: the per-step cost at its most visible).

The overhead is plain ÷ probed − 1 on samples/s: the geometric mean of the per-round ratios, with its
95 % Student-t interval. Goal: at most 2 %. ``--write`` puts the table in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import REPO, host_line, interleaved, median, ratio_interval, write_section

from iobench.probe.session import job_environment

FAST_JOB = """
import json, sys, time, torch
from torch.utils.data import DataLoader, Dataset

class Memory(Dataset):
    def __len__(self):
        return 1_000_000
    def __getitem__(self, i):
        end = time.thread_time() + 0.0002  # a little CPU per sample
        while time.thread_time() < end:
            pass
        return torch.zeros(64), i % 10

steps, settle = int(sys.argv[1]), 20
model = torch.nn.Linear(64, 10)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
samples = 0
for step, (x, y) in enumerate(DataLoader(Memory(), batch_size=16, num_workers=2)):
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
    if step == settle:
        start, samples = time.perf_counter(), 0
    samples += len(y)
    if step == steps:
        break
print(json.dumps({"samples_per_s": samples / (time.perf_counter() - start)}))
"""


def _rate(stdout: str) -> float:
    """The job's own samples/s: the last JSON line it printed."""
    line = [x for x in stdout.splitlines() if x.startswith("{")][-1]
    return float(json.loads(line)["samples_per_s"])


def runner(argv: list[str], how: str, scratch: Path):  # type: ignore[no-untyped-def]
    """A contender: runs the job ``how`` (plain, hooks, probe) and returns its samples/s."""

    def run() -> float:
        with tempfile.TemporaryDirectory(dir=scratch) as tmp:
            env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
            command = argv
            if how == "hooks":
                env = job_environment(Path(tmp), ceilings=False, base=env)
            elif how == "probe":
                never = ["--steps", "100000000", "--seconds", "1e9", "--then", "continue"]
                command = [sys.executable, "-m", "iobench.cli", "probe", "--out", tmp, *never, "--", *argv]
            proc = subprocess.run(command, env=env, capture_output=True, text=True, check=True, cwd=REPO)
            return _rate(proc.stdout)

    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=300, help="steps of the fast job (the images job: a sixth)")
    ap.add_argument("--tree", type=Path, default=Path(tempfile.gettempdir()) / "probe-tree")
    ap.add_argument("--write", action="store_true", help="write the section into docs/benchmarks.md")
    args = ap.parse_args()
    subprocess.run(
        [sys.executable, str(REPO / "examples/probe/make_tree.py"), str(args.tree), "--samples", "2048"],
        check=True,
    )
    scratch = Path(tempfile.mkdtemp(prefix="bench-probe-"))
    fast = scratch / "fast_job.py"
    fast.write_text(FAST_JOB)
    jobs = {
        "images": [
            sys.executable,
            str(REPO / "examples/probe/train_images.py"),
            str(args.tree),
            "--workers",
            "1",
            "--batch-size",
            "32",
            "--model",
            "tiny",
            "--steps",
            str(args.steps // 6),
        ],
        "fast": [sys.executable, str(fast), str(args.steps)],
    }
    started = host_line()
    rows = []
    for name, argv in jobs.items():
        rates = interleaved(
            {how: runner(argv, how, scratch) for how in ("plain", "hooks", "probe")}, args.rounds
        )
        for how in ("hooks", "probe"):
            r, lo, hi = ratio_interval(rates["plain"], rates[how])
            rows.append(
                f"| {name} | {how} | {args.rounds} | {median(rates['plain']):,.0f} | {median(rates[how]):,.0f} "
                f"| **{100 * (r - 1):+.2f} %** | {100 * (lo - 1):+.2f} % to {100 * (hi - 1):+.2f} % |"
            )
            print(rows[-1], flush=True)
    body = (
        f"""## What the probe costs a job (`python benchmarks/bench_probe_overhead.py --rounds {args.rounds} --steps {args.steps}`)

Started {started}; ended at load {host_line().rsplit("load ", 1)[1]}. The job's own samples/s (after its
first steps), plain against probed, in interleaved rounds; overhead = plain ÷ probed − 1, the geometric
mean of the per-round ratios with its 95 % Student-t interval. `hooks`: the probe's sitecustomize
loaded and recording; `probe`: the whole `iobench probe --then continue` following the job, its
window never closing. `images`: PIL-decoded JPEGs, one worker, a tiny model (examples/probe);
`fast`: in-memory samples, two workers, a step of about a millisecond.

| job | probed by | rounds | plain samples/s (median) | probed (median) | overhead | 95 % interval |
|---|---|---:|---:|---:|---:|---|
"""
        + "\n".join(rows)
        + "\n\nGoal: at most 2 % of the job's samples/s.\n"
    )
    print(body)
    if args.write:
        write_section("probe-overhead", body)


if __name__ == "__main__":
    main()
