"""`iobench inspect [--json] [--accelerators 8xH100] [--decode-rate N | --results RUN_DIR]`."""

from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING, Any

from rich.console import Console

if TYPE_CHECKING:
    from iobench.analysis.decoderate import DecodeRate

    from .accelerators import AcceleratorDemand


def add_inspect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    parser.add_argument(
        "--accelerators",
        metavar="NxTYPE",
        help="the accelerators this host feeds, e.g. 8xH100 (types: configs/accelerators.yaml); "
        "default: the GPUs NVML finds",
    )
    parser.add_argument(
        "--model", default="resnet50", help="the model trained, for the demand (default resnet50)"
    )
    parser.add_argument(
        "--demand",
        choices=("training", "mlperf_storage"),
        default="training",
        help="per-accelerator demand: achieved training (default) or MLPerf Storage's emulated rate "
        "(the only figure configs/accelerators.yaml has for b200 and mi355)",
    )
    rate = parser.add_mutually_exclusive_group()
    rate.add_argument(
        "--decode-rate",
        type=float,
        metavar="N",
        help="JPEG decode+augment samples/s per core at the mean sample of the model's dataset (110 KB for "
        "resnet50), as recommend takes it (default: measure here, and keep the figure as this host's "
        "calibration for recommend and the sweep's estimate)",
    )
    rate.add_argument(
        "--results",
        metavar="RUN_DIR",
        help="take the per-core decode+augment rate from a sweep's run directory",
    )
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="loader workers per rank (one rank per accelerator): warn when they and the trainers want more "
        "cores than the host has",
    )
    parser.add_argument(
        "--root",
        default="/",
        help="read sys/ and proc/ under this directory instead of / (a recorded tree; for tests and bug reports)",
    )


def _decode_rate(
    args: argparse.Namespace, demand: AcceleratorDemand | None, notes: list[str]
) -> DecodeRate | None:
    """Given, from a run, or measured here and kept as this host's calibration (which recommend
    and the sweep's estimate then use): analysis/decoderate.py."""
    from iobench.analysis import decoderate

    if args.decode_rate is not None or args.results:
        # a given rate is at the sample size the cores are priced at: the model's dataset's, as recommend
        at = demand.sample_bytes if demand else decoderate.REFERENCE_SAMPLE_BYTES
        return decoderate.resolve(
            rate=args.decode_rate, results=[args.results] if args.results else None, sample_bytes=at
        )
    if demand is None or demand.kind == "mlperf_storage":
        return None  # nothing to compare a rate with (MLPerf Storage does not decode): spare the measurement
    if os.path.realpath(args.root) != "/":
        notes.append("decode rate: not measured for a recorded tree (this CPU is not its CPU)")
        return None
    rate = decoderate.measure_here()
    try:
        notes.append(f"decode rate: kept as this host's calibration in {decoderate.keep_rate(rate)}")
    except OSError as exc:
        notes.append(f"decode rate: could not keep it as this host's calibration ({exc})")
    return rate


def inspect_command(args: argparse.Namespace, console: Console, nvml_lib: Any = None) -> int:
    """Inventory, demand, decode rate and pitfalls; ``nvml_lib`` replaces pynvml (tests)."""
    from iobench.analysis.decoderate import REFERENCE_SAMPLE_BYTES
    from iobench.results.codec import to_json

    from .accelerators import demand_of_gpus, parse_accelerators
    from .cores import estimate_cores
    from .inventory import ObjectClients, collect_inventory
    from .pitfalls import find_pitfalls
    from .render import render_inspection

    if not os.path.isdir(args.root):
        raise ValueError(f"--root {args.root}: not a directory (it should hold sys/ and proc/)")
    demand = parse_accelerators(args.accelerators, args.model, args.demand) if args.accelerators else None
    inv = collect_inventory(args.root, nvml_lib)
    notes = list(inv.notes)
    if demand is None:
        demand, why_not = demand_of_gpus(inv.gpus, args.model, args.demand)
        if why_not:
            notes.append(why_not)
    rate = _decode_rate(args, demand, notes)
    if args.workers is not None and args.workers < 0:
        raise ValueError(f"--workers {args.workers}: must be 0 or more")
    pitfalls, check_notes = find_pitfalls(inv, demand, rate, args.workers)
    notes += check_notes
    # the cores needed, whether or not the host has them (MLPerf Storage's emulation does not decode)
    cores = estimate_cores(demand, rate) if demand and rate and demand.kind != "mlperf_storage" else None
    # this Python's, not the recorded tree's: what an S3 tier run from here can read with
    clients = ObjectClients.here()
    if args.json:
        doc = {
            "inventory": to_json(inv),
            "demand": None if demand is None else {**to_json(demand), "samples_per_s": demand.samples_per_s},
            "decode_rate": None
            if rate is None
            else rate.as_dict(demand.sample_bytes if demand else REFERENCE_SAMPLE_BYTES),
            "cores_needed": to_json(cores),
            "pitfalls": to_json(pitfalls),
            "object_clients": to_json(clients),
            "notes": notes,
        }
        print(json.dumps(doc, indent=2))
    else:
        render_inspection(console, inv, demand, rate, cores, clients, pitfalls, notes)
    return 0
