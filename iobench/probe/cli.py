"""`iobench probe -- CMD ARGS...`: where the user's own training job starves its accelerator.

    iobench probe [--out DIR] [--steps N] [--seconds S] [--ceilings] [--then stop|continue] \\
        -- python train.py --epochs 90

Importing this module is cheap: the work imports what it needs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from .outcome import Outcome

THEN = ("stop", "continue")


def add_probe_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", metavar="RUN_DIR", help="run directory (default iobench-runs/probe-<timestamp>)")
    p.add_argument(
        "--steps",
        type=int,
        default=50,
        help="measure at least this many steps after the warm-up (default 50; over at least 5 s)",
    )
    p.add_argument(
        "--seconds",
        type=float,
        default=30.0,
        help="or this many seconds when the steps are slow (default 30; at least 10 steps)",
    )
    p.add_argument(
        "--ceilings",
        action="store_true",
        help="after the window, time the job's step alone (its last batches replayed from memory) and its "
        "loader alone (drained with nothing consuming): the differential method on the job itself",
    )
    p.add_argument(
        "--then",
        choices=THEN,
        default="stop",
        help="after the window: stop the job (default; it exits 0 through SystemExit) or let it go on unmeasured",
    )
    p.add_argument("job", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the job's command, after --")


def probe_command(args: argparse.Namespace, console: Console) -> int:
    from iobench.results.spec import MinMeasure

    from .command import check_command
    from .session import Probe

    argv = list(args.job)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    command = check_command(argv)
    if args.steps < 1 or args.seconds <= 0:
        raise ValueError(
            f"--steps {args.steps} --seconds {args.seconds}: give at least 1 step and more than 0 s"
        )
    out = Path(args.out or f"iobench-runs/probe-{dt.datetime.now():%Y%m%d-%H%M%S}").absolute()
    probe = Probe(
        command,
        out,
        least=MinMeasure(seconds=args.seconds, steps=args.steps, need="either"),
        ceilings=args.ceilings,
        then=args.then,
        on_result=lambda outcome: _result(outcome, out),
    )
    return probe.run()


def _result(outcome: Outcome, out: Path) -> None:
    """Write the run directory and the sweep file, and say what was found (on stderr: the job's
    stdout is its own)."""
    from rich.console import Console

    from iobench.report.terminal import print_report

    from .publish import publish
    from .sweepfile import write_sweep_file

    said = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)
    summary = publish(out, outcome)
    if not summary.ok:
        said.print(f"\niobench probe: nothing measured: {summary.error}", markup=False, style="red")
        said.print(f"iobench probe: run directory {out}", markup=False)
        return
    print_report([summary], said, title=f"iobench probe -- {' '.join(outcome.command)}")
    sweep = write_sweep_file(outcome, out / "sweep.yaml", out / "dataset")
    running = "" if outcome.exit_code is not None else "; the job goes on, unmeasured"
    said.print(f"\niobench probe: run directory {out}; sweep file {sweep}{running}", markup=False)
