"""The iobench command line. Heavy modules (torch, decoders) load only in the commands using them."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.text import Text

# piped output (CI logs, files) gets a wide table rather than rich's 80-column default
console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, highlight=False)


def _delegated(module: str, command: str) -> Callable[[argparse.Namespace], int]:
    """A subcommand whose code lives in ``module`` (imported when it runs, not when parsing):
    ``command(args, console) -> exit code``."""

    def run(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(module, __package__), command)(args, console)

    return run


def _cmd_synth(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from iobench.host.units import format_bytes, parse_size

    from .datasets.synth import synthesize

    if (args.size is None) == (args.samples is None):
        raise ValueError("give exactly one of --size (e.g. 2GB) or --samples (e.g. 10000)")
    with Progress(
        TextColumn("synth"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=console
    ) as bar:
        task = bar.add_task("synth", total=None)
        manifest = synthesize(
            args.out,
            size_bytes=parse_size(args.size) if args.size else None,
            samples=args.samples,
            seed=args.seed,
            shard_bytes=parse_size(args.shard_size),
            format=args.format,
            row_group=args.row_group,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    console.print(
        f"{manifest.num_samples} samples in {len(manifest.shards)} shards, {format_bytes(manifest.total_bytes)}, "
        f"mean JPEG {manifest.mean_sample_bytes / 1024:.1f} KiB -> {args.out}"
    )
    return 0


FEW_SHARDS = 8  # fewer shards than this starve a loader with more readers: pack warns


def _cmd_pack(args: argparse.Namespace) -> int:
    from iobench.host.units import format_bytes, parse_size

    from .datasets.pack import KEYMAP_NAME, pack_imagefolder

    manifest = pack_imagefolder(
        args.imagefolder,
        args.out,
        shard_bytes=parse_size(args.shard_size),
        seed=args.seed,
        format=args.format,
        row_group=args.row_group,
    )
    console.print(
        f"{manifest.num_samples} samples, {len(manifest.class_names or [])} classes, "
        f"{len(manifest.shards)} shards, {format_bytes(manifest.total_bytes)} -> {args.out} "
        f"(keys to original files: {KEYMAP_NAME})",
        highlight=False,
    )
    skipped = manifest.source["skipped_files"]
    if skipped:
        console.print(f"[yellow]skipped {manifest.source['skipped']} file(s):[/yellow]")
        for f in skipped[:10]:
            console.print(Text(f"  {f['path']}: {f['why']}"))
        if manifest.source["skipped"] > 10:
            console.print(f"  ... all of them in {args.out}/manifest.json (source.skipped_files)")
    if len(manifest.shards) < FEW_SHARDS:
        size = format_bytes(manifest.total_bytes / (2 * FEW_SHARDS))
        console.print(
            Text(
                f"note: {len(manifest.shards)} shard(s): a loader reading whole shards needs one per reader "
                f"(workers x ranks), and one rank refuses fewer; for up to {FEW_SHARDS} readers pack again "
                f"with --shard-size {size}",
                "yellow",
            )
        )
    return 0


def _cmd_upload(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from iobench.host.units import format_bytes

    if "://" not in args.url:  # a mounted path: CephFS (or any shared file system it checks)
        from .tiers import make_tier

        console.print(make_tier({"kind": "cephfs", "path": args.url}).upload_dataset(args.dataset))
        return 0
    with Progress(TextColumn("upload"), BarColumn(), MofNCompleteColumn(), console=console) as bar:
        task = bar.add_task("upload", total=None)
        progress = lambda done, total: bar.update(task, completed=done, total=total)  # noqa: E731
        if args.url.startswith("rados://"):
            from iobench.ceph.upload import upload_rados

            report = upload_rados(
                args.dataset, args.url, workers=args.workers, verify=args.verify, progress=progress
            )
        else:
            from iobench.datasets.upload import upload_s3

            report = upload_s3(
                args.dataset,
                args.url,
                endpoint_url=args.endpoint_url,
                profile=args.profile,
                workers=args.workers,
                verify=args.verify,
                progress=progress,
            )
    console.print(
        f"{report.url}: {report.objects} object(s): {len(report.uploaded)} data object(s) uploaded "
        f"({format_bytes(report.bytes_uploaded)}), {len(report.skipped)} already there and intact, and the "
        f"manifest, last; verified by {report.verified}"
        + (f"; created {report.created}" if report.created else ""),
        highlight=False,
    )
    return 0


def _cmd_lab(args: argparse.Namespace) -> int:
    from .lab import main_lab

    return main_lab(args)


def _cmd_objects(args: argparse.Namespace) -> int:
    from iobench.host.units import format_bytes

    from .datasets.objects import explode

    samples = explode(args.dataset)
    console.print(
        f"{len(samples)} objects ({format_bytes(sum(s['bytes'] for s in samples))}) in {args.dataset}/objects; "
        "`iobench dataset upload` uploads them with the shards"
    )
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from .results.api import load_summaries

    summaries = load_summaries(args.run_dir)
    if args.json:
        import json

        from .results.codec import to_json

        print(json.dumps({"run_dir": str(args.run_dir), "cells": [to_json(s) for s in summaries]}, indent=2))
    elif args.mlperf:
        from .report.mlperf import mlperf_view

        console.print(mlperf_view(summaries))
    else:
        from .report.terminal import print_report

        print_report(summaries, console, title=f"iobench report {args.run_dir}")
    if args.html is not None:
        from .report.html import write_html

        page = write_html(Path(args.run_dir), Path(args.html) if args.html else None)
        (err_console if args.json else console).print(f"\nHTML report: {page}")  # stdout stays JSON
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    import json

    from .report.compare import compare_runs, render_comparison

    comparison = compare_runs(args.run_a, args.run_b)
    if args.json:
        print(json.dumps(comparison, indent=2))
    else:
        console.print(render_comparison(comparison))
    return 0


def build_parser() -> argparse.ArgumentParser:
    from iobench.monitor.cli import add_monitor_arguments
    from iobench.sweep.cli import add_sweep_arguments

    from . import __version__
    from .cell.cli import add_calibrate_arguments
    from .inspect.cli import add_inspect_arguments
    from .recommend.cli import add_recommend_arguments

    p = argparse.ArgumentParser(
        prog="iobench", description="Where does the input pipeline starve the accelerators?"
    )
    p.add_argument("--version", action="version", version=f"iobench {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("sweep", help="run a sweep (no CONFIG: the embedded default on the local disk)")
    add_sweep_arguments(s)
    s.set_defaults(func=_delegated(".sweep.cli", "sweep_command"))

    dg = sub.add_parser(
        "diagnose",
        help="a sweep with the differential ceilings (accelerator, prep from RAM, fetch from the tier) "
        "and the accelerator-capacity check in every cell",
    )
    add_sweep_arguments(dg)
    dg.set_defaults(func=_delegated(".sweep.cli", "sweep_command"))

    d = sub.add_parser("dataset", help="make datasets").add_subparsers(dest="dataset_command", required=True)
    syn = d.add_parser("synth", help="synthesise ImageNet-like WebDataset shards")
    syn.add_argument("--out", required=True)
    syn.add_argument("--size", help="total size, e.g. 2GB")
    syn.add_argument("--samples", type=int, help="number of samples instead of --size")
    syn.add_argument("--seed", type=int, default=0)
    syn.add_argument("--shard-size", default="128MB")
    syn.add_argument(
        "--format", choices=("wds", "parquet"), default="wds", help="WebDataset tar (+ DALI index) or Parquet"
    )
    syn.add_argument("--row-group", type=int, default=1000, help="Parquet only: samples per row group")
    syn.set_defaults(func=_cmd_synth)
    pk = d.add_parser("pack", help="pack a train/<class>/*.JPEG tree into shards")
    pk.add_argument("imagefolder")
    pk.add_argument("--out", required=True)
    pk.add_argument("--shard-size", default="128MB")
    pk.add_argument("--seed", type=int, default=0, help="shuffle seed for the sample order")
    pk.add_argument(
        "--format", choices=("wds", "parquet"), default="wds", help="WebDataset tar (+ DALI index) or Parquet"
    )
    pk.add_argument("--row-group", type=int, default=1000, help="Parquet only: samples per row group")
    pk.set_defaults(func=_cmd_pack)
    ob = d.add_parser(
        "objects",
        help="add one object per sample (objects/NNNNNN.jpg + objects/index.json) to a shard dataset, "
        "for the objects layout (layout: objects)",
    )
    ob.add_argument("dataset", help="local dataset directory (with manifest.json)")
    ob.set_defaults(func=_cmd_objects)

    st = d.add_parser(
        "upload",
        aliases=["stage"],  # its name before 0.2
        help="upload a dataset to s3://bucket/prefix, rados://pool/prefix or a CephFS path (idempotent)",
    )
    st.add_argument("dataset", help="local dataset directory (with manifest.json)")
    st.add_argument(
        "url", help="s3://bucket/prefix, rados://pool/prefix (pool created when missing) or a CephFS path"
    )
    st.add_argument("--endpoint-url", help="S3 endpoint (default AWS_ENDPOINT_URL)")
    st.add_argument("--profile", help="AWS profile for the credentials (default: environment)")
    st.add_argument("--workers", type=int, default=4, help="objects uploaded in parallel")
    st.add_argument(
        "--verify", choices=("metadata", "full"), default="metadata", help="full: read every object back"
    )
    st.set_defaults(func=_cmd_upload)

    lab = sub.add_parser(
        "lab",
        help="a real single-node Ceph (S3 via radosgw, RADOS, CephFS) on 127.0.0.1",
        description="up: start a lab, or bring an existing one back (the same cluster: pools, buckets, "
        "keys, files); down: stop it, keeping its data (--purge: remove it); restart [DAEMON]: one daemon "
        "or all, keeping the cluster; status: each daemon up/down with pid and log, and the health "
        "(exit 0 all up, 1 degraded, 3 not running).",
    )
    lab.add_argument("lab_cmd", choices=["up", "down", "status", "purge", "restart"])
    lab.add_argument(
        "daemon",
        nargs="?",
        choices=["mon", "mgr", "osd", "rgw", "mds", "fuse", "all"],
        help="with restart: the daemon to restart (default all)",
    )
    lab.add_argument("--dir", help="lab directory (default ~/.cache/iobench/lab)")
    lab.add_argument("--port", type=int, default=None, help="S3 port of radosgw (new lab: 7480)")
    lab.add_argument("--cephfs", action="store_true", help="also run an MDS and mount CephFS at DIR/mnt")
    lab.add_argument("--no-mgr", action="store_true", help="skip ceph-mgr (saves ~300 MB)")
    lab.add_argument(
        "--objectstore",
        choices=["memstore", "bluestore"],
        default=None,
        help="new lab: memstore (default; RAM, fastest; keeps data across a clean stop only) or bluestore "
        "(a sparse file; keeps data even when the OSD is killed)",
    )
    lab.add_argument("--purge", action="store_true", help="with down: also remove the lab directory")
    lab.add_argument(
        "--json", action="store_true", help="with status, down, restart: machine-readable output"
    )
    lab.set_defaults(func=_cmd_lab)

    r = sub.add_parser("report", help="print the report of a run directory")
    r.add_argument("run_dir")
    r.add_argument(
        "--html",
        nargs="?",
        const="",
        metavar="OUT",
        help="also write a self-contained HTML page with plots (default RUN_DIR/report.html)",
    )
    view = r.add_mutually_exclusive_group()
    view.add_argument(
        "--mlperf",
        action="store_true",
        help="the cells as MLPerf Storage reports them (AU per epoch, pass/fail)",
    )
    view.add_argument("--json", action="store_true", help="every cell's summary as one JSON document")
    r.set_defaults(func=_cmd_report)

    c = sub.add_parser("compare", help="what changed between two run directories, cell by cell")
    c.add_argument("run_a")
    c.add_argument("run_b")
    c.add_argument("--json", action="store_true", help="machine-readable output")
    c.set_defaults(func=_cmd_compare)

    for name, module, add_arguments, help_text in (
        (
            "recommend",
            ".recommend.cli",
            add_recommend_arguments,
            "where should a dataset live, and is this server right for the job: options ranked from a "
            "sweep's measurements, with the crossovers as the dataset grows",
        ),
        (
            "inspect",
            ".inspect.cli",
            add_inspect_arguments,
            "this host's CPUs, NUMA nodes, memory, NVMe/RAID links, file systems, NICs/RDMA and GPUs, "
            "and the pitfalls it sees",
        ),
        (
            "calibrate",
            ".cell.cli",
            add_calibrate_arguments,
            "time a real trainer's step alone on this host, for the emulated accelerator's host work",
        ),
        (
            "monitor",
            ".monitor.cli",
            add_monitor_arguments,
            "Prometheus metrics beside a running job (--pid) or a running sweep (--run-dir)",
        ),
    ):
        command = sub.add_parser(name, help=help_text)
        add_arguments(command)
        command.set_defaults(func=_delegated(module, f"{name}_command"))
    return p


# exit codes (README, "Exit codes"): 0 done; 1 the run failed (a cell failed, storage or network
# gave up, a disk full or read-only); 2 usage (a bad flag, config value or path, a missing extra);
# 130 interrupted; a sweep stopped by signal N: 128 + N
EXIT_FAILED = 1
EXIT_USAGE = 2


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
        sys.stdout.flush()  # here, so that a reader that has gone is caught below
        return code
    except BrokenPipeError:
        # the reader closed the pipe (`iobench compare A B --json | head`): a normal end; later
        # writes, and the interpreter's last flush, go nowhere instead of failing again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130
    except ImportError as exc:
        # an optional extra that is not installed: its message carries the pip line
        err_console.print(Text.assemble(("error: ", "red"), str(exc)), soft_wrap=True)
        return EXIT_USAGE
    except (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
        # usage: a flag, a config value or a path to change (each error carries its explanation)
        err_console.print(Text.assemble(("error: ", "red"), str(exc)), soft_wrap=True)
        return EXIT_USAGE
    except OSError as exc:
        # the run failed: storage or network unreachable, a disk full or read-only, a timeout
        err_console.print(Text.assemble(("error: ", "red"), str(exc)), soft_wrap=True)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
