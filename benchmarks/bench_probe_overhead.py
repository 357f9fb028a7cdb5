"""What `iobench probe` costs the job it measures.

    python benchmarks/bench_probe_overhead.py [--pairs 40] [--rounds 8] [--steps 600] [--write]

1. The hooks' CPU, in one process (precise): a DataLoader without workers over in-memory samples, its
   ``next()`` timed in CPU per step (thread CPU, so other processes' load does not count) with torch's
   own functions (`plain`), with the loop's hooks recording (`loop`), and with the loop's and the
   readers' hooks recording (`both`; without workers the batch is made inside ``next()``). ``--pairs``
   rounds of short runs in rotating order; medians. The loop's hook costs its process that much per
   step; the readers' hook costs each worker that much per batch, beside the batch's own making.
2. Whole jobs (for scale): the same plain PyTorch job run `plain`, with the hooks loaded and recording
   (`hooks`, nobody following the records), and under the whole `iobench probe --then continue` with a
   window that never closes (`probe`), once each per round in a rotating order, compared on the job's
   own samples/s (timed by the job after its first steps): overhead = plain ÷ probed − 1, the geometric
   mean of the per-round ratios with its 95 % Student-t interval; and the cores the probe's own process
   used while it followed the job. `images`: JPEGs decoded with PIL in one worker and a tiny model
   (examples/probe); `fast`: in-memory samples from two workers and a step of a few milliseconds.

Goal: at most 2 % of a job's samples/s. ``--write`` puts the section into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, host_line, interleaved, median, ratio_interval, write_section

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


def hook_costs(pairs: int, steps: int = 400) -> dict[str, list[float]]:
    """CPU µs per ``next()`` of an in-memory DataLoader without workers: plain, loop hooks, both hooks."""
    import torch
    from torch.utils.data import DataLoader, Dataset
    from torch.utils.data import dataloader as dl
    from torch.utils.data._utils import fetch

    def functions() -> tuple:
        return dl._BaseDataLoaderIter.__next__, dl.DataLoader.__iter__, fetch._MapDatasetFetcher.fetch

    def use(which: tuple) -> None:
        dl._BaseDataLoaderIter.__next__, dl.DataLoader.__iter__, fetch._MapDatasetFetcher.fetch = which

    plain = functions()
    os.environ["IOBENCH_PROBE_DIR"] = tempfile.mkdtemp(prefix="bench-probe-hooks-")
    from iobench.probe.inject import _iobench_probe
    from iobench.probe.inject._iobench_probe import worker

    _iobench_probe.install()
    hooked = functions()

    class Memory(Dataset):
        def __len__(self) -> int:
            return 10**9

        def __getitem__(self, i: int):  # type: ignore[no-untyped-def]
            return torch.zeros(8), 1

    def cpu_per_step(which: tuple, readers: bool) -> float:
        use(which)
        worker.STATE.recording = readers
        batches = iter(DataLoader(Memory(), batch_size=16, num_workers=0))
        next(batches)
        start = time.thread_time()
        for _ in range(steps):
            next(batches)
        return (time.thread_time() - start) / steps * 1e6

    ways = {"plain": (plain, False), "loop": (hooked, False), "both": (hooked, True)}
    out: dict[str, list[float]] = {name: [] for name in ways}
    for i in range(pairs):
        order = list(ways)[i % 3 :] + list(ways)[: i % 3]
        for name in order:
            out[name].append(cpu_per_step(*ways[name]))
    use(plain)
    return out


def _rate(stdout: str) -> float:
    """The job's own samples/s: the last JSON line it printed."""
    line = [x for x in stdout.splitlines() if x.startswith("{")][-1]
    return float(json.loads(line)["samples_per_s"])


def runner(argv: list[str], how: str, scratch: Path, probe_cores: list[float]):  # type: ignore[no-untyped-def]
    """A contender: runs the job ``how`` (plain, hooks, probe) and returns its samples/s."""
    from iobench.probe.session import job_environment
    from iobench.results.api import load_summaries

    def run() -> float:
        with tempfile.TemporaryDirectory(dir=scratch) as tmp:
            env = dict(os.environ)
            env.pop("IOBENCH_PROBE_DIR", None)
            command = argv
            if how == "hooks":
                env = job_environment(Path(tmp), ceilings=False, base=env)
            elif how == "probe":
                never = ["--steps", "100000000", "--seconds", "1e9", "--then", "continue"]
                command = [sys.executable, "-m", "iobench.cli", "probe", "--out", tmp, *never, "--", *argv]
            proc = subprocess.run(command, env=env, capture_output=True, text=True, check=True, cwd=REPO)
            if how == "probe":
                probe_cores.append(load_summaries(tmp)[0].consumer["probe_cores"])
            return _rate(proc.stdout)

    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=40, help="rounds of the in-process CPU measure")
    ap.add_argument("--rounds", type=int, default=8, help="rounds of the whole jobs")
    ap.add_argument("--steps", type=int, default=600, help="steps of the fast job (the images job: a sixth)")
    ap.add_argument("--tree", type=Path, default=Path(tempfile.gettempdir()) / "probe-tree")
    ap.add_argument("--write", action="store_true", help="write the section into docs/benchmarks.md")
    args = ap.parse_args()
    started = host_line()
    costs = hook_costs(args.pairs)
    plain, loop, both = (median(costs[k]) for k in ("plain", "loop", "both"))
    loop_us = statistics.median(a - b for a, b in zip(costs["loop"], costs["plain"], strict=True))
    reader_us = statistics.median(a - b for a, b in zip(costs["both"], costs["loop"], strict=True))
    print(
        f"plain {plain:.1f} us, loop {loop:.1f}, both {both:.1f}: loop +{loop_us:.1f}, readers +{reader_us:.1f}"
    )

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
            *("--workers", "1", "--batch-size", "32", "--model", "tiny", "--steps", str(args.steps // 6)),
        ],
        "fast": [sys.executable, str(fast), str(args.steps)],
    }
    rows = []
    for name, argv in jobs.items():
        cores: list[float] = []
        rates = interleaved(
            {how: runner(argv, how, scratch, cores) for how in ("plain", "hooks", "probe")}, args.rounds
        )
        for how in ("hooks", "probe"):
            r, lo, hi = ratio_interval(rates["plain"], rates[how])
            step_ms = 1000.0 * (32 if name == "images" else 16) / median(rates["plain"])
            own = f"{median(cores):.3f}" if how == "probe" and cores else "-"
            rows.append(
                f"| {name} | {how} | {args.rounds} | {median(rates['plain']):,.0f} ({step_ms:.1f} ms a step) "
                f"| {median(rates[how]):,.0f} | **{100 * (r - 1):+.2f} %** | {100 * (lo - 1):+.2f} % to "
                f"{100 * (hi - 1):+.2f} % | {own} |"
            )
            print(rows[-1], flush=True)
    body = (
        f"""## What the probe costs a job (`python benchmarks/bench_probe_overhead.py --pairs {args.pairs} --rounds {args.rounds} --steps {args.steps}`)

Started {started}; ended at load {host_line().rsplit("load ", 1)[1]}.

**The hooks' CPU** (one process, a DataLoader without workers over in-memory samples, thread CPU per
`next()`, medians of {args.pairs} rounds in rotating order): plain {plain:.1f} µs, with the loop's hooks
{loop:.1f} µs, with the readers' hooks too {both:.1f} µs. So the loop's hooks cost the training process
**{loop_us:.1f} µs per step** and the readers' hooks cost a worker **{reader_us:.1f} µs per batch**: 1 %
of a step of {loop_us / 10:.1f} ms, and 1 % of a batch that takes {reader_us / 10:.1f} ms to make.

**Whole jobs** (the job's own samples/s after its first steps; overhead = plain ÷ probed − 1, the
geometric mean of {args.rounds} interleaved rounds with its 95 % interval; `hooks`: the probe's
sitecustomize loaded and recording, nobody following; `probe`: the whole `iobench probe --then continue`,
its window never closing; the probe's own cores: what its process used following the job):

| job | probed by | rounds | plain samples/s (median) | probed (median) | overhead | 95 % interval | the probe's own cores |
|---|---|---:|---:|---:|---:|---|---:|
"""
        + "\n".join(rows)
        + """

On a shared 2-core host the whole-job intervals are as wide as the load of their seconds: the CPU
figures above are what resolves the hooks' cost.

Goal: at most 2 % of the job's samples/s.
"""
    )
    print(body)
    if args.write:
        write_section("probe-overhead", body)


if __name__ == "__main__":
    main()
