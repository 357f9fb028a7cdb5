"""`iobench recommend`: where should this dataset live, and is this server right for the job?

    iobench recommend --dataset-size 5TB --sample-size 115KB --accelerators 8xH100 \\
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

    from .calibrate import Calibration, Figure
    from .placements import Scenario
    from .recommendation import Recommendation
    from .scenario import Decoding
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


def _size(text: str, what: str, *, positive: bool = True, given: str | None = None) -> int:
    """Bytes in ``text``, the value of flag ``what`` (or the part of it that is a size: ``given`` is
    then the whole value, ``2x3.84TB``)."""
    from iobench.host.units import parse_size

    try:
        value = parse_size(text)
    except ValueError as exc:
        raise ValueError(f"{what} {given or text}: {exc}") from None
    if positive and value <= 0:
        raise ValueError(f"{what} {given or text}: must be above 0 bytes")
    return value


DESCRIPTION = (
    "What to buy for a training job's input pipeline: where the dataset should live (each node's NVMe, "
    "sharded over the nodes' NVMe, a parallel file system, an object store or Ceph behind the NVMe cache, "
    "Ceph with a RAM cache) and how to decode it, for one node of the cluster. The answer comes first: "
    "the option with the highest AU that fits the node (its NVMe, RAM, cores and storage network), why, "
    "and what would change it; where none reaches AU 0.90, the cheapest change that would (a rate to "
    "measure, drives, RAM, cores, GPU decode). Then every option, where each figure comes from "
    "(measured, given, published, derived, reference or assumed), the crossovers as the dataset grows "
    "and the published rules of thumb, tested. docs/recommend.md has the model."
)
EPILOG = """examples:
  iobench recommend --dataset-size 1.2TB --accelerators 8xH100
  iobench recommend --dataset-size 50TB --accelerators 16xH200 --tier-rate ceph=2.5GB/s
  iobench recommend --dataset-size 200TB --accelerators 32xH100 --tier-rate pfs=ior-read.json
  iobench recommend --dataset-size 5TB --accelerators 8xMI300X --per-accelerator 3000 --nvme 8x3.84TB \\
      --ram 2TB --cores 128"""


def add_recommend_arguments(p: argparse.ArgumentParser) -> None:
    import textwrap

    # the examples keep their lines: the description is wrapped here, as argparse would
    p.description, p.epilog = textwrap.fill(DESCRIPTION, 79), EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    _dataset_arguments(p)
    _job_arguments(p)
    _server_arguments(p)
    _model_arguments(p)
    _rate_arguments(p)
    from .checkpointrender import add_checkpoint_sizing_arguments

    add_checkpoint_sizing_arguments(p)


def _dataset_arguments(p: argparse.ArgumentParser) -> None:
    """The dataset: its sizes, or a manifest."""
    data = p.add_argument_group("the dataset (sizes or a manifest)")
    data.add_argument("--dataset-size", metavar="SIZE", help="total size, e.g. 5TB")
    data.add_argument(
        "--sample-size",
        metavar="SIZE",
        help="mean bytes per sample, e.g. 115KB (default: the runs' datasets with --results, else the dataset "
        "--model trains on: ImageNet's ~115 KB for resnet50)",
    )
    data.add_argument("--manifest", metavar="PATH", help="a dataset's manifest.json (or its directory)")


def _job_arguments(p: argparse.ArgumentParser) -> None:
    """The job: accelerators, model, demand, decoding, batch."""
    from iobench.accelerators.demand import DEMANDS

    job = p.add_argument_group("the job")
    job.add_argument(
        "--accelerators",
        required=True,
        metavar="NxTYPE",
        help="the whole job, e.g. 64xB200 (configs/accelerators.yaml: a100, h100, h200, b200, l40s, mi300x, "
        "mi325x, mi355)",
    )
    job.add_argument(
        "--model",
        help="model of configs/accelerators.yaml (default resnet50 where the accelerator has it)",
    )
    job.add_argument(
        "--demand",
        choices=DEMANDS,
        help="per-accelerator demand: achieved training (the default where the table has it) or MLPerf "
        "Storage's emulated rate (the only figure for b200 and mi355)",
    )
    job.add_argument(
        "--decode",
        choices=("jpeg", "none"),
        help="what the loader does to a sample: jpeg (decode and augment; the default for --demand training) "
        "or none (read its bytes only: MLPerf Storage's emulation, unet3d's NPZ volumes, Parquet)",
    )
    job.add_argument(
        "--per-accelerator",
        type=float,
        metavar="SAMPLES_PER_S",
        help="samples/s one accelerator consumes: your own figure (needed where the table has none, e.g. mi300x)",
    )
    job.add_argument(
        "--batch-size",
        type=int,
        help="per accelerator, for RAM sizing (default: the batch of MLPerf Storage's workload with "
        "--demand mlperf_storage, else 256)",
    )


def _server_arguments(p: argparse.ArgumentParser) -> None:
    """The target server: what is not given comes from --server or the reference server."""
    host = p.add_argument_group(
        "the target server (what is not given comes from --server, else the reference server of the "
        "accelerator type; never from this machine unless --server this-host)"
    )
    host.add_argument(
        "--server",
        metavar="NAME",
        help="a reference node of configs/servers.yaml (dgx-h100, dgx-h200, dgx-b200, dgx-a100), or this-host",
    )
    host.add_argument(
        "--inspect",
        metavar="FILE",
        help="the node as `iobench inspect --json` described it: cores, RAM, data NVMe and their PCIe "
        "generation, GPUs",
    )
    host.add_argument(
        "--accelerators-per-node",
        type=int,
        metavar="N",
        help="accelerators on one node: a larger job runs on several such nodes (default: the node's, else 8)",
    )
    host.add_argument(
        "--nvme", metavar="[N x]SIZE", help="one node's local NVMe, e.g. 2x3.84TB or 7.68TB, or none"
    )
    host.add_argument(
        "--nvme-gen",
        type=int,
        metavar="GEN",
        help="the NVMe drives' PCIe generation, for their datasheet read rate (default: the node's, else 4)",
    )
    host.add_argument("--ram", metavar="SIZE", help="one node's RAM, e.g. 1TB")
    host.add_argument("--cores", type=int, help="one node's CPU cores for the input pipeline")
    host.add_argument(
        "--nic", metavar="RATE", help="one node's storage network, bytes/s, e.g. 50GB/s (400 Gb/s)"
    )
    host.add_argument(
        "--memory-cache",
        metavar="SIZE",
        help="RAM for a dataset cache (default: what the loader's buffers leave, up to half the RAM)",
    )


def _model_arguments(p: argparse.ArgumentParser) -> None:
    """The model's assumptions."""
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
        help="DALI GPU decode rate per GPU, NVIDIA only (default: a sweep's DALI cell on a GPU, else 7,000)",
    )


def _rate_arguments(p: argparse.ArgumentParser) -> None:
    """The rates measured on the target, and a sweep's results."""
    rates = p.add_argument_group("measured rates of the target's storage (replace the model's assumptions)")
    rates.add_argument(
        "--tier-rate",
        action="append",
        default=[],
        metavar="KEY=RATE|FILE",
        help="a tier's read rate as measured: KEY nvme (the node's array), nvme-device (one drive), object "
        "(what one node reads from an S3 store), ceph, pfs (a shared or parallel file system: Lustre, "
        "Storage Scale, WEKA, VAST, NFS); RATE e.g. 24GB/s, or a fio, IOR, elbencho, warp or rados bench JSON "
        "file (a buffered read that fits in RAM, or fio on a device that is not NVMe given as nvme, is "
        "refused) (repeatable)",
    )
    rates.add_argument(
        "--rates",
        metavar="FILE",
        help="a YAML file of measured rates (docs/recommend.md, 'Your measured rates')",
    )
    p.add_argument(
        "--results",
        nargs="+",
        metavar="RUN_DIR",
        help="run directories of sweeps (without --sample-size or --manifest, the sample size is the runs' "
        "datasets'); which measured figures carry over to the target is said in the output; a sweep with a "
        "partial-hit shard cache narrows how a cache and its backend share the reads",
    )
    p.add_argument(
        "--same-storage",
        action="store_true",
        help="with --results: the runs measured the target's own storage (else a rate measured on another "
        "kind of device, or on a lab on the measuring host's loopback, does not carry over)",
    )
    p.add_argument(
        "--ranks",
        metavar="N[,N...]",
        help="with --results: the synchronous data-parallel job at these rank counts "
        "(default: the accelerators, 64, 512, 4096)",
    )
    p.add_argument(
        "--detail",
        action="store_true",
        help="every input's source in full, not only its value and what it is",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _dataset(args: argparse.Namespace, model: str) -> tuple[float, float, str]:
    if args.manifest:
        if args.dataset_size or args.sample_size:
            raise ValueError("give --manifest or --dataset-size/--sample-size, not both")
        from ..datasets.manifest import MANIFEST_NAME, Manifest

        path = Path(args.manifest)
        directory = path.parent if path.name == MANIFEST_NAME else path
        try:
            m = Manifest.load(directory)
        except (OSError, ValueError) as exc:
            raise ValueError(f"--manifest {args.manifest}: {exc}") from None
        if not m.num_samples:
            raise ValueError(f"--manifest {args.manifest}: the dataset has no samples")
        return float(m.total_bytes), float(m.mean_sample_bytes), f"manifest {directory / MANIFEST_NAME}"
    if not args.dataset_size:
        raise ValueError("give the dataset: --dataset-size SIZE (and --sample-size SIZE), or --manifest PATH")
    total = _size(args.dataset_size, "--dataset-size")
    sample: float  # bytes: given ones are whole, a mean over runs or a model's dataset need not be
    if args.sample_size:
        sample, said = _size(args.sample_size, "--sample-size"), "given"
    elif args.results:
        sample, said = _runs_sample_bytes(args.results)
    else:
        sample, said = _model_sample_bytes(model)
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
    return float(size), f"the sample size of the datasets of --results {' '.join(run_dirs)}"


def _model_sample_bytes(model: str) -> tuple[float, str]:
    """The mean sample of the dataset ``model`` trains on (configs/accelerators.yaml's models)."""
    from iobench.accelerators.demand import load_model_table

    dataset = (load_model_table().get(model) or {}).get("dataset")
    if not dataset:
        raise ValueError(
            f"give the sample size: --sample-size SIZE (configs/accelerators.yaml names no dataset for "
            f"--model {model}), or --results to take the runs' datasets'"
        )
    size = float(dataset["sample_bytes"])
    return size, (
        f"sample size: the mean of {dataset['name']}, which --model {model} trains on "
        f"({' '.join(dataset['source'].split())}); --sample-size overrides it"
    )


def _demand(args: argparse.Namespace, kind: str) -> tuple[str, str, Figure, int | None]:
    """The model, the kind of demand and the rate per accelerator, every error naming its flag.
    Without --model, resnet50 where the accelerator has it; without --demand, training where the
    table has it, else the one figure it has (and the source says so)."""
    from iobench.accelerators.demand import DEMANDS, load_accelerator_table, lookup_demand

    from .calibrate import Figure

    table = load_accelerator_table()
    if kind not in table:
        raise ValueError(
            f"--accelerators {args.accelerators}: unknown type {args.accelerators.split('x')[-1].strip()!r}; "
            f"known: {', '.join(sorted(table))} "
            "(or give its rate with --per-accelerator N and the node with --nvme, --ram, --cores)"
        )
    models = table[kind]["models"]
    model = args.model or "resnet50"
    if not models:
        raise ValueError(
            f"--accelerators {args.accelerators}: no public source found gives what one {table[kind]['description']} "
            "consumes (no published training rate, no MLPerf Storage workload): give it with --per-accelerator "
            "SAMPLES_PER_S, e.g. the samples/s one of them trained at in your own run"
        )
    if model not in models:
        raise ValueError(
            f"--model {model}: configs/accelerators.yaml has no {model} figure for {kind}; give --model one of "
            f"{', '.join(sorted(models))}, e.g. --model {sorted(models)[-1]} (or your own rate with --per-accelerator N)"
        )
    have = [d for d in DEMANDS if d in models[model]]
    demand = args.demand or ("training" if "training" in have else have[0])
    if demand not in have:
        raise ValueError(
            f"--demand {demand} for {kind}/{model}: configs/accelerators.yaml has no such figure (no public "
            f"source gives one); give --demand {' or '.join(have)}, or --per-accelerator N"
        )
    chose = (
        f" (--demand not given: {demand}, the only figure the table has)"
        if not args.demand and demand != "training"
        else ""
    )
    d = lookup_demand(kind, model, demand)
    return (
        model,
        demand,
        Figure(
            d.samples_per_s,
            f"configs/accelerators.yaml {kind}/{model}/{demand}{chose}: {d.source}",
            origin=d.origin,
        ),
        d.step_batch,
    )


def _target(args: argparse.Namespace, kind: str) -> tuple[Server | None, str]:
    """The node the flags leave to a profile, and how the target was described, in words."""
    from .servers import THIS_HOST, for_accelerator, from_inspect, profile, this_server

    given = [
        f"{flag} {v}"
        for flag, v in (("--nvme", args.nvme), ("--ram", args.ram), ("--cores", args.cores))
        if v is not None
    ]
    if args.server and args.inspect:
        raise ValueError("give --server NAME or --inspect FILE, not both")
    if args.inspect:
        server = from_inspect(args.inspect)
        how = "described by --inspect"
    elif args.server:
        server = this_server() if args.server == THIS_HOST else profile(args.server)
        how = "chosen with --server"
    elif len(given) == 3:
        return None, "as given: " + ", ".join(given)
    else:
        reference = for_accelerator(kind)
        if reference is None:
            missing = [f for f in ("--nvme", "--ram", "--cores") if getattr(args, f[2:]) is None]
            raise ValueError(
                f"the target node: {', '.join(missing)} not given, and configs/servers.yaml has no "
                f"reference node for {kind}; give them, or --server NAME, --inspect FILE, or --server {THIS_HOST} "
                "to model this machine"
            )
        server = reference
        how = f"the reference node for {kind}, as --server was not given"
    said = f"{server.name}: {server.summary()} ({how}; {server.source})"
    if given:
        said += "; given instead: " + ", ".join(given)
    return server, said


def _positive(value: float | None, flag: str) -> None:
    if value is not None and value <= 0:
        raise ValueError(f"{flag} {value}: must be above 0")


def scenario(args: argparse.Namespace) -> Scenario:
    """The scenario the arguments describe, every value checked, every error naming its flag."""
    from iobench.accelerators.demand import accelerator_facts, read_cpu
    from iobench.analysis import decoderate

    from .calibrate import Figure
    from .placements import Scenario
    from .rates import MeasuredRates, load_rates, parse_tier_rate
    from .units import units_of

    count, name = parse_count_of(args.accelerators, "--accelerators")
    kind = name.lower()
    if args.per_accelerator is not None:
        _positive(args.per_accelerator, "--per-accelerator")
        model, demand, step_batch = args.model or "resnet50", args.demand or "training", None
        per = Figure(args.per_accelerator, "given with --per-accelerator", origin="given")
    else:
        model, demand, per, step_batch = _demand(args, kind)
    batch = args.batch_size or step_batch or 256
    dataset_bytes, sample_bytes, dataset_said = _dataset(args, model)
    facts = accelerator_facts(kind)
    server, target = _target(args, kind)
    node = _node(args, server)
    ram = node["ram_bytes"]
    for flag, value in (("--batch-size", batch), ("--prefetch", args.prefetch)):
        if value < 1:
            raise ValueError(f"{flag} {value}: must be at least 1")
    memory_cache = _size(args.memory_cache, "--memory-cache", positive=False) if args.memory_cache else None
    if memory_cache is not None and memory_cache > ram:
        raise ValueError(f"--memory-cache {args.memory_cache} is more than the RAM ({ram / 1e9:,.0f} GB)")
    dali = None
    if args.dali_per_gpu is not None:
        _positive(args.dali_per_gpu, "--dali-per-gpu")
        dali = Figure(args.dali_per_gpu, "given with --dali-per-gpu", origin="given")
    rates = load_rates(args.rates, ram) if args.rates else MeasuredRates()
    rates = rates.with_tiers(dict(parse_tier_rate(t, ram) for t in args.tier_rate))
    decoding, decoding_said = _decoding(args, demand)
    # a sample read without decoding stays as read: its buffers hold its bytes
    decoded = (
        sample_bytes
        if decoding == "none"
        else float(_size(args.decoded_sample_size, "--decoded-sample-size"))
    )
    return Scenario(
        dataset_bytes=dataset_bytes,
        sample_bytes=sample_bytes,
        accelerators=count,
        accelerator=name,
        per_accelerator=per,
        accelerator_memory_bytes=facts.memory_bytes if facts else None,
        **node,
        rates=rates,
        decoding=decoding,
        decoding_said=decoding_said,
        cache_policy=args.cache_policy,
        access=args.access,
        batch=batch,
        prefetch=args.prefetch,
        decoded_sample_bytes=decoded,
        memory_cache_bytes=float(memory_cache) if memory_cache is not None else None,
        dali_per_gpu=dali,
        target=target,
        dataset_said=dataset_said,
        decode=decoderate.resolve(rate=args.decode_rate, results=args.results, sample_bytes=sample_bytes),
        trainer_cores=_trainer_cores(model, demand, batch),
        vendor=facts.vendor if facts else "nvidia",
        read_cpu=read_cpu(model) if decoding == "none" else None,
        units=units_of([args.dataset_size, args.sample_size, args.nvme, args.ram, args.memory_cache]),
    )


def _profiled(server: Server | None) -> Server:
    """The server a flag left its figure to: _target gives none only when --nvme, --ram and --cores
    were all given."""
    assert server is not None, "no server, and a node figure not given as a flag"
    return server


def _node(args: argparse.Namespace, server: Server | None) -> dict:
    """One node's accelerators, NVMe, RAM, cores and storage network: the flags, else the server's."""
    from iobench.host.units import parse_bandwidth

    from .servers import known_generations, nvme_read_per_device

    per_node = args.accelerators_per_node
    if per_node is None:
        per_node = (server.accelerators_per_node if server else None) or 8
    if per_node < 1:
        raise ValueError(f"--accelerators-per-node {per_node}: must be at least 1")
    nvme_text = args.nvme if args.nvme is not None else (server.nvme if server else None)
    devices, nvme = 0, 0
    if nvme_text and nvme_text.strip().lower() != "none":
        devices, each = parse_count_of(nvme_text, "--nvme")
        nvme = devices * _size(each, "--nvme", given=nvme_text)
    generation = args.nvme_gen or (server.nvme_generation if server else None)
    if args.nvme_gen is not None and args.nvme_gen not in known_generations():
        raise ValueError(
            f"--nvme-gen {args.nvme_gen}: datasheet figures are kept for PCIe generations "
            f"{', '.join(map(str, known_generations()))} (configs/servers.yaml); or give --tier-rate nvme-device=RATE"
        )
    ram = _size(args.ram if args.ram is not None else _profiled(server).ram, "--ram")
    cores = args.cores if args.cores is not None else _profiled(server).cores
    if cores < 1:
        raise ValueError(f"--cores {cores}: must be at least 1")
    nic = None
    if args.nic is not None:
        try:
            nic = parse_bandwidth(args.nic)
        except ValueError as exc:
            raise ValueError(f"--nic: {exc}") from None
    elif server is not None:
        nic = server.nic_bytes_per_s
    return dict(
        nvme_devices=devices,
        nvme_bytes=float(nvme),
        ram_bytes=float(ram),
        cores=cores,
        per_node=per_node,
        nvme_device_rate=nvme_read_per_device(generation),
        nic_bytes_per_s=nic,
    )


def _decoding(args: argparse.Namespace, demand: str) -> tuple[Decoding, str]:
    """What the loader does to a sample, and where that was said. MLPerf Storage's emulation reads
    without decoding (DLIO)."""
    decoding: Decoding = args.decode or ("none" if demand == "mlperf_storage" else "jpeg")
    said = (
        f"--decode {args.decode}"
        if args.decode
        else "read without decoding, as MLPerf Storage's emulation reads (--decode jpeg to price decoding)"
        if decoding == "none"
        else "JPEG decoded and augmented (--decode none for a workload read without decoding)"
    )
    return decoding, said


def _trainer_cores(model: str, demand: str, batch: int) -> Figure | None:
    """The whole cores a trainer keeps; none where MLPerf Storage's emulation sleeps, or for a model
    without a host cost."""
    from iobench.accelerators.demand import models_with_host_work
    from iobench.accelerators.hostcost import host_cost

    from .calibrate import Figure

    if demand == "mlperf_storage" or model not in models_with_host_work():
        return None
    trainer = host_cost(model, batch)
    return Figure(
        trainer.reserved_cores,
        f"{trainer.cores:.2f} cores busy per step alone, rounded up to whole cores: {trainer.describe()}",
        origin="reference" if trainer.kind == "default" else "measured",
    )


def recommend(args: argparse.Namespace) -> Recommendation:
    """Everything the command reports."""
    from dataclasses import replace

    from .answer import answer
    from .changes import changes
    from .crossovers import crossovers
    from .hypotheses import checks
    from .mixrule import fit, mix_cells
    from .placements import options
    from .recommendation import Recommendation

    s = scenario(args)
    if args.ranks and not args.results:
        raise ValueError("--ranks needs --results: the prediction runs on a sweep's measured steps")
    if args.same_storage and not args.results:
        raise ValueError("--same-storage needs --results: it says the runs measured the target's storage")
    mixed = tuple(mix_cells(args.results)) if args.results else ()
    s = replace(s, mix=fit(list(mixed)))
    cal, measured = _measured(args, s, mixed)
    if cal is not None and cal.trainer_ms is not None:
        # the trainers' measured CPU is priced per sample (the cells' cores figure), not as whole cores
        s = replace(s, trainer_cores=None)
    ranked = tuple(options(s, cal))
    leaders, crossings = crossovers(s, cal)
    found = tuple(changes(s, list(ranked), cal))
    return Recommendation(
        scenario=s,
        answer=answer(s, ranked, found, tuple(crossings)),
        options=ranked,
        changes=found,
        crossovers=tuple(crossings),
        leaders=tuple(leaders),
        hypotheses=tuple(checks(s, cal)),
        mix_cells=mixed,
        **measured,
    )


def _measured(args: argparse.Namespace, s: Scenario, mixed: tuple) -> tuple[Calibration | None, dict]:
    """The calibration from --results and what of it carries over (none without --results)."""
    from iobench.analysis.knee import knees
    from iobench.results.api import load_summaries

    from .calibrate import calibrate, load_cells
    from .hostcheck import carry_over
    from .scale import at_scale, ranks_of
    from .validate import check_cells

    if not args.results:
        return None, {}
    cells = load_cells(args.results)
    if not cells:
        if mixed:  # a sweep that only reads (a cache + backend sweep): it narrows the mix rule alone
            return None, {}
        raise ValueError(
            f"--results {' '.join(args.results)}: no cell finished ok; nothing to calibrate from"
        )
    # the CPU options decode in DataLoader workers
    cal, carried = carry_over(calibrate(cells, loader="torch"), s, same_storage=args.same_storage)
    return cal, dict(
        calibration=cal,
        carried_over=tuple(carried),
        validation=tuple(check_cells(cells)),
        at_scale=tuple(at_scale(args.results, ranks_of(args.ranks, s.accelerators))),
        knees=tuple(k for run in args.results for k in knees(load_summaries(run))),
    )


def recommend_command(args: argparse.Namespace, console: Console) -> int:
    from .checkpointrender import checkpoint_json, render_checkpoints, wanted
    from .render import recommendation_json, render_recommendation

    sizing = _checkpoint_sizing(args) if wanted(args) else None
    report = recommend(args) if sizing is None or args.dataset_size or args.manifest else None
    if args.json:
        out = recommendation_json(report) if report is not None else {}
        print(
            json.dumps({**out, **({"checkpoint": checkpoint_json(sizing)} if sizing else {})}, indent=2),
            file=console.file,
        )
        return 0
    if report is not None:
        render_recommendation(report, console, detail=args.detail)
    if sizing is not None:
        render_checkpoints(sizing, console)
    return 0


def _checkpoint_sizing(args: argparse.Namespace):
    """The checkpoint sizing for ``--accelerators`` on their reference node (checkpointrender.py)."""
    from .checkpointrender import sizing_of
    from .servers import for_accelerator

    count, kind = parse_count_of(args.accelerators, "--accelerators")
    server = for_accelerator(kind)
    if args.accelerators_per_node:
        per, source = args.accelerators_per_node, "given: --accelerators-per-node"
    elif server is not None and server.accelerators_per_node:
        per, source = server.accelerators_per_node, f"{server.description} (configs/servers.yaml)"
    else:
        per, source = 8, "assumed: 8 per node"
    return sizing_of(args, count, per, source)
