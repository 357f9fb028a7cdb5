"""`iobench calibrate --model small_cnn|resnet50 [--device cpu|cuda] [--batch-size N]`."""

from __future__ import annotations

import argparse

from rich.console import Console


def add_calibrate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, choices=("small_cnn", "resnet50"), help="the model to time")
    parser.add_argument(
        "--device", choices=("cpu", "cuda"), help="where the model runs (default: CUDA where present)"
    )
    parser.add_argument("--batch-size", type=int, default=64, help="samples per step (default 64)")


def calibrate_command(args: argparse.Namespace, console: Console) -> int:
    """Time the model's step alone and keep it as this host's calibration (accelerators/hostcost.py)."""
    from iobench.accelerators import hostcost
    from iobench.accelerators.calibrate import measure_host_cost

    if args.batch_size < 1:
        raise ValueError(f"--batch-size={args.batch_size}: must be at least 1")
    cost, notes = measure_host_cost(args.model, args.device, args.batch_size)
    for note in notes:
        console.print(f"[yellow]note:[/] {note}")
    path = hostcost.keep_host_cost(cost)
    console.print(cost.describe())
    if cost.device_s is not None:
        console.print(f"device span per step alone (CUDA events): {1000 * cost.device_s:.1f} ms")
    if cost.step_cv is not None:  # what an emulated accelerator's compute: {cv: calibrated} draws with
        console.print(f"step spread alone: cv {cost.step_cv:.3f} (sd / mean)")
    console.print(f"{cost.ops_per_step} torch operators per step; kept in {path}")
    return 0
