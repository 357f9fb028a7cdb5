"""`iobench report RUN_DIR` and `iobench compare RUN_A RUN_B`: their arguments and the commands.
Importing this module is cheap (the parser is built for every command); the work imports what it
needs (plots load matplotlib only when a page is written)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console


def add_report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir")
    p.add_argument(
        "--html",
        nargs="?",
        const="",
        metavar="OUT",
        help="also write a self-contained HTML page with plots (default RUN_DIR/report.html)",
    )
    view = p.add_mutually_exclusive_group()
    view.add_argument(
        "--mlperf",
        action="store_true",
        help="the cells as MLPerf Storage reports them (AU per epoch, pass/fail)",
    )
    view.add_argument("--json", action="store_true", help="every cell's summary as one JSON document")
    p.add_argument(
        "--detail",
        action="store_true",
        help="every figure of every cell (epochs, diagnosis, predictions at scale, notes), not the few lines each",
    )


def report_command(args: argparse.Namespace, console: Console) -> int:
    from iobench.results.api import load_summaries

    if args.html is not None:  # its extra is checked before anything is printed
        from .plots import require_matplotlib

        require_matplotlib()
    summaries = load_summaries(args.run_dir)
    if args.json:
        from iobench.results.codec import to_json

        print(json.dumps({"run_dir": str(args.run_dir), "cells": [to_json(s) for s in summaries]}, indent=2))
    elif args.mlperf:
        from .mlperf import mlperf_view

        console.print(mlperf_view(summaries))
    else:
        from .terminal import print_report

        print_report(summaries, console, title=f"iobench report {args.run_dir}", detail=args.detail)
    if args.html is not None:
        from .html import write_html

        page = write_html(Path(args.run_dir), Path(args.html) if args.html else None)
        said = Console(stderr=True, highlight=False) if args.json else console  # stdout stays JSON
        said.print(f"\nHTML report: {page}")
    return 0


def add_compare_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_a")
    p.add_argument("run_b")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def compare_command(args: argparse.Namespace, console: Console) -> int:
    from .compare import compare_runs, render_comparison

    comparison = compare_runs(args.run_a, args.run_b)
    if args.json:
        print(json.dumps(comparison, indent=2))
    else:
        console.print(render_comparison(comparison))
    return 0
