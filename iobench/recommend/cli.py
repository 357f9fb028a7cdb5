"""`iobench recommend`: where should this dataset live, and is this server right for the job?

    iobench recommend --dataset-size 5TB --sample-size 110KB --accelerators 8xH100 \\
        --nvme 2x3.84TB --ram 1TB --cores 96 --results runs/nvme runs/s3 [--json]

Importing this module is cheap: the work imports what it needs.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from iobench.host.units import format_bytes

if TYPE_CHECKING:
    from rich.console import Console

    from .placements import Scenario
    from .servers import Server

_COUNT_X = re.compile(r"^\s*(?:(\d+)\s*[x×*]\s*)?(\S.*?)\s*$", re.IGNORECASE)


def parse_count_of(text: str, what: str) -> tuple[int, str]:
    """``"8xH100"`` -> (8, "H100"); ``"H100"`` -> (1, "H100"). Raises ValueError naming ``what``."""
    m = _COUNT_X.match(text or "")
    if not m:
        raise ValueError(f"{what}={text!r}: expected COUNTxNAME, e.g. 8xH100")
    count = int(m.group(1)) if m.group(1) else 1
    if count < 1:
        raise ValueError(f"{what}={text!r}: the count must be at least 1")
    return count, m.group(2)


def _size(text: str, what: str, *, positive: bool = True) -> int:
    from iobench.host.units import parse_size

    try:
        value = parse_size(text)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None
    if positive and value <= 0:
        raise ValueError(f"{what}={text!r}: must be above 0 bytes")
    return value


def add_recommend_arguments(p: argparse.ArgumentParser) -> None:
    from iobench.cell.demand import DEMANDS

    data = p.add_argument_group("the dataset (sizes or a manifest)")
    data.add_argument("--dataset-size", metavar="SIZE", help="total size, e.g. 5TB")
    data.add_argument(
        "--sample-size",
        metavar="SIZE",
        help="mean bytes per sample, e.g. 110KB (default: the runs' datasets with --results, else the dataset "
        "--model trains on: ImageNet's ~110 KB for resnet50)",
    )
    data.add_argument("--manifest", metavar="PATH", help="a dataset's manifest.json (or its directory)")
    job = p.add_argument_group("the job")
    job.add_argument(
        "--accelerators", required=True, metavar="NxTYPE", help="e.g. 8xH100 (configs/accelerators.yaml)"
    )
    job.add_argument(
        "--model", default="resnet50", help="model of configs/accelerators.yaml (default resnet50)"
    )
    job.add_argument(
        "--demand",
        choices=DEMANDS,
        default="training",
        help="per-accelerator demand: achieved training (default) or MLPerf Storage's emulated rate",
    )
    job.add_argument(
        "--per-accelerator", type=float, metavar="SAMPLES_PER_S", help="override the demand figure"
    )
    job.add_argument(
        "--batch-size", type=int, default=256, help="per accelerator, for RAM sizing (default 256)"
    )
    host = p.add_argument_group(
        "the target server (what is not given comes from --server, else the reference server of the "
        "accelerator type; never from this machine unless --server this-host)"
    )
    host.add_argument(
        "--server",
        metavar="NAME",
        help="a reference server of configs/servers.yaml (dgx-h100, dgx-h200, dgx-a100), or this-host",
    )
    host.add_argument("--nvme", metavar="[N x]SIZE", help="local NVMe, e.g. 2x3.84TB or 7.68TB, or none")
    host.add_argument("--ram", metavar="SIZE", help="host RAM, e.g. 1TB")
    host.add_argument("--cores", type=int, help="CPU cores for the input pipeline")
    host.add_argument(
        "--nic", metavar="RATE", help="the storage network's bandwidth, bytes/s, e.g. 50GB/s (400 Gb/s)"
    )
    host.add_argument(
        "--memory-cache", metavar="SIZE", help="RAM for a dataset cache (default: half the RAM)"
    )
    model = p.add_argument_group("model assumptions")
    model.add_argument(
        "--cache-policy",
        choices=("auto", "lru", "static"),
        default="auto",
        help="iobench's shard caches: auto (static when the cache cannot hold the dataset, as the tiers "
        "choose; default), lru, or static (keep what is cached, read the rest through)",
    )
    model.add_argument(
        "--access",
        choices=("shuffled", "sequential"),
        default="shuffled",
        help="shard order per epoch (default shuffled)",
    )
    model.add_argument(
        "--decoded-sample-size", default="1MB", metavar="SIZE", help="RAM per decoded sample (default 1MB)"
    )
    model.add_argument(
        "--prefetch", type=int, default=2, help="batches in flight per loader worker (default 2)"
    )
    model.add_argument(
        "--decode-rate",
        type=float,
        metavar="SAMPLES_PER_S",
        help="CPU decode+augment samples/s per core at the sample size (default: from --results, else "
        "this host's calibration by `iobench inspect`, else the reference figure of docs/recommend.md)",
    )
    model.add_argument(
        "--dali-per-gpu",
        type=float,
        metavar="SAMPLES_PER_S",
        help="DALI GPU decode rate per GPU (default: a sweep's DALI cell on a GPU, else 7,000)",
    )
    p.add_argument(
        "--results",
        nargs="+",
        metavar="RUN_DIR",
        help="run directories of sweeps on this hardware (without --sample-size or --manifest, the "
        "sample size is the runs' datasets')",
    )
    p.add_argument(
        "--ranks",
        metavar="N[,N...]",
        help="with --results: the synchronous data-parallel job at these rank counts "
        "(default: the accelerators, 64, 512, 4096)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _dataset(args: argparse.Namespace) -> tuple[float, float, str]:
    if args.manifest:
        if args.dataset_size or args.sample_size:
            raise ValueError("give --manifest or --dataset-size/--sample-size, not both")
        from ..datasets.manifest import MANIFEST_NAME, Manifest

        path = Path(args.manifest)
        directory = path.parent if path.name == MANIFEST_NAME else path
        m = Manifest.load(directory)
        if not m.num_samples:
            raise ValueError(f"--manifest {args.manifest}: the dataset has no samples")
        return float(m.total_bytes), float(m.mean_sample_bytes), f"manifest {directory / MANIFEST_NAME}"
    if not args.dataset_size:
        raise ValueError("give the dataset: --dataset-size SIZE (and --sample-size SIZE), or --manifest PATH")
    total = _size(args.dataset_size, "--dataset-size")
    if args.sample_size:
        sample, said = _size(args.sample_size, "--sample-size"), "given"
    elif args.results:
        sample, said = _runs_sample_bytes(args.results)
    else:
        sample, said = _model_sample_bytes(args.model)
    if sample > total:
        raise ValueError(
            f"the sample size ({format_bytes(sample)}) is larger than --dataset-size {args.dataset_size}"
        )
    return float(total), float(sample), "given" if said == "given" else f"size given; {said}"


def _runs_sample_bytes(run_dirs: list[str]) -> tuple[float, str]:
    """The median mean sample size of the datasets the runs' cells read (their manifests)."""
    import statistics

    from iobench.results.store import cell_summaries, read_manifest

    sizes = []
    for run_dir in run_dirs:
        if not Path(run_dir).is_dir():
            raise FileNotFoundError(f"--results {run_dir}: no such directory (give an iobench run directory)")
        for s in cell_summaries(Path(run_dir)):
            m = read_manifest(Path(run_dir), s.cell_id) if s.ok else None
            if m is not None and m.dataset.mean_sample_bytes:
                sizes.append(m.dataset.mean_sample_bytes)
    if not sizes:
        raise ValueError(
            f"--results {' '.join(run_dirs)}: no cell's manifest gives a sample size; give --sample-size SIZE"
        )
    size = statistics.median(sizes)
    return float(
        size
    ), f"sample size {format_bytes(size)} from the datasets of --results {' '.join(run_dirs)}"


def _model_sample_bytes(model: str) -> tuple[float, str]:
    """The mean sample of the dataset ``model`` trains on (configs/accelerators.yaml's models)."""
    from iobench.cell.demand import load_model_table

    dataset = (load_model_table().get(model) or {}).get("dataset")
    if not dataset:
        raise ValueError(
            f"give the sample size: --sample-size SIZE (configs/accelerators.yaml names no dataset for "
            f"--model {model}), or --results to take the runs' datasets'"
        )
    size = float(dataset["sample_bytes"])
    return size, (
        f"sample size {format_bytes(size)}: the mean of {dataset['name']}, which --model {model} trains on "
        f"({' '.join(dataset['source'].split())}); --sample-size overrides it"
    )


def _target(args: argparse.Namespace, kind: str) -> tuple[Server | None, str]:
    """The server the flags leave to a profile, and how the target was described, in words."""
    from .servers import THIS_HOST, for_accelerator, profile, this_host

    given = [
        f"{flag} {v}"
        for flag, v in (("--nvme", args.nvme), ("--ram", args.ram), ("--cores", args.cores))
        if v is not None
    ]
    if args.server:
        server = this_host() if args.server == THIS_HOST else profile(args.server)
    elif len(given) == 3:
        return None, "as given: " + ", ".join(given)
    else:
        server = for_accelerator(kind)
        if server is None:
            missing = [f for f in ("--nvme", "--ram", "--cores") if getattr(args, f[2:]) is None]
            raise ValueError(
                f"the target server: {', '.join(missing)} not given, and configs/servers.yaml has no "
                f"reference server for {kind}; give them, or --server NAME, or --server {THIS_HOST} to model "
                "this machine"
            )
    how = (
        "chosen with --server"
        if args.server
        else f"the reference server for {kind}, as --server was not given"
    )
    said = f"{server.name}: {server.summary()} ({how}; {server.source})"
    if given:
        said += "; given instead: " + ", ".join(given)
    return server, said


def scenario(args: argparse.Namespace) -> Scenario:
    """The scenario the arguments describe, every value checked."""
    from iobench.analysis import decoderate
    from iobench.cell.demand import load_accelerator_table, lookup_demand

    from .calibrate import Figure
    from .placements import Scenario

    dataset_bytes, sample_bytes, _ = _dataset(args)
    count, name = parse_count_of(args.accelerators, "--accelerators")
    table = load_accelerator_table()
    kind = name.lower()
    if args.per_accelerator is not None:
        if args.per_accelerator <= 0:
            raise ValueError(f"--per-accelerator {args.per_accelerator}: must be above 0 samples/s")
        per = Figure(args.per_accelerator, "given with --per-accelerator")
    else:
        if kind not in table:
            raise ValueError(
                f"--accelerators {args.accelerators}: unknown type {name!r}; known: {', '.join(sorted(table))} "
                "(or give its rate with --per-accelerator)"
            )
        d = lookup_demand(kind, args.model, args.demand)
        per = Figure(
            d.samples_per_s, f"configs/accelerators.yaml {kind}/{args.model}/{args.demand}: {d.source}"
        )
    memory_gib = (table.get(kind) or {}).get("memory_gib")
    server, target = _target(args, kind)
    nvme_text = args.nvme if args.nvme is not None else (server.nvme if server else None)
    devices, nvme = 0, 0
    if nvme_text and nvme_text.strip().lower() != "none":
        devices, each = parse_count_of(nvme_text, "--nvme")
        nvme = devices * _size(each, "--nvme")
    ram = _size(args.ram if args.ram is not None else server.ram, "--ram")  # type: ignore[union-attr]
    cores = args.cores if args.cores is not None else server.cores  # type: ignore[union-attr]
    if cores < 1:
        raise ValueError(f"--cores {cores}: must be at least 1")
    nic = None
    if args.nic is not None:
        from iobench.host.units import parse_bandwidth

        try:
            nic = parse_bandwidth(args.nic)
        except ValueError as exc:
            raise ValueError(f"--nic: {exc}") from None
    elif server is not None:
        nic = server.nic_bytes_per_s
    for flag, value in (("--batch-size", args.batch_size), ("--prefetch", args.prefetch)):
        if value < 1:
            raise ValueError(f"{flag} {value}: must be at least 1")
    memory_cache = _size(args.memory_cache, "--memory-cache", positive=False) if args.memory_cache else None
    if memory_cache is not None and memory_cache > ram:
        raise ValueError(f"--memory-cache {args.memory_cache} is more than the RAM ({ram / 1e9:,.0f} GB)")
    dali = None
    if args.dali_per_gpu is not None:
        if args.dali_per_gpu <= 0:
            raise ValueError(f"--dali-per-gpu {args.dali_per_gpu}: must be above 0 samples/s")
        dali = Figure(args.dali_per_gpu, "given with --dali-per-gpu")
    from iobench.cell.demand import models_with_host_work
    from iobench.cell.hostcost import host_cost

    # MLPerf Storage's emulation sleeps: no trainer's host work, as iobench's emulation of it
    sleeps = args.demand == "mlperf_storage" or args.model not in models_with_host_work()
    trainer = None if sleeps else host_cost(args.model, args.batch_size)
    return Scenario(
        dataset_bytes=dataset_bytes,
        sample_bytes=sample_bytes,
        accelerators=count,
        accelerator=name,
        per_accelerator=per,
        accelerator_memory_bytes=memory_gib * 2**30 if memory_gib else None,
        nvme_devices=devices,
        nvme_bytes=float(nvme),
        ram_bytes=float(ram),
        cores=cores,
        cache_policy=args.cache_policy,
        access=args.access,
        batch=args.batch_size,
        prefetch=args.prefetch,
        decoded_sample_bytes=float(_size(args.decoded_sample_size, "--decoded-sample-size")),
        memory_cache_bytes=float(memory_cache) if memory_cache is not None else None,
        dali_per_gpu=dali,
        nic_bytes_per_s=nic,
        target=target,
        decode=decoderate.resolve(rate=args.decode_rate, results=args.results, sample_bytes=sample_bytes),
        trainer_cores=Figure(
            trainer.reserved_cores,
            f"{trainer.cores:.2f} cores busy per step alone, rounded up to whole cores: {trainer.describe()}",
        )
        if trainer
        else None,
    )


def recommend(args: argparse.Namespace) -> dict:
    """Everything the command reports, as plain objects (the --json document)."""
    from iobench.analysis.knee import knees
    from iobench.results.api import load_summaries

    from .calibrate import calibrate, load_cells
    from .crossovers import crossovers
    from .hypotheses import checks
    from .placements import options
    from .scale import at_scale, ranks_of
    from .validate import check_cells

    s = scenario(args)
    cal, validation, scaled, found = None, [], [], []
    if args.ranks and not args.results:
        raise ValueError("--ranks needs --results: the prediction runs on a sweep's measured steps")
    if args.results:
        cells = load_cells(args.results)
        if not cells:
            raise ValueError(
                f"--results {' '.join(args.results)}: no cell finished ok; nothing to calibrate from"
            )
        cal = calibrate(cells, loader="torch")  # the CPU options decode in DataLoader workers
        validation = check_cells(cells)
        scaled = at_scale(args.results, ranks_of(args.ranks, s.accelerators))
        found = [k for run in args.results for k in knees(load_summaries(run))]
    leaders, changes = crossovers(s, cal)
    return {
        "scenario": s,
        "dataset_source": _dataset(args)[2],
        "requirement": s.requirement,
        "calibration": cal,
        "options": options(s, cal),
        "crossovers": changes,
        "leaders": leaders,
        "hypotheses": checks(s, cal),
        "validation": validation,
        "at_scale": scaled,
        "knees": found,
    }


def recommend_command(args: argparse.Namespace, console: Console) -> int:
    from .render import render, to_json

    report = recommend(args)
    if args.json:
        print(json.dumps(to_json(report), indent=2), file=console.file)
    else:
        render(report, console)
    return 0
