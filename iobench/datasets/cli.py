"""`iobench dataset synth | pack | objects | index | upload`: their arguments, and the commands that make
datasets. Putting one on a tier (`upload`) is iobench/tiers/cli.py's: it needs the tiers and Ceph,
which this package sits below. Importing this module is cheap: the work imports what it needs."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from .manifest import Manifest

SHARD_SIZE_HELP = "bytes per shard, e.g. 128MB (default: at least 4 shards per usable core of this host)"


def _add_shard_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shard-size", help=SHARD_SIZE_HELP)
    p.add_argument(
        "--format", choices=("wds", "parquet"), default="wds", help="WebDataset tar (+ DALI index) or Parquet"
    )
    p.add_argument("--row-group", type=int, default=1000, help="Parquet only: samples per row group")


def add_synth_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True)
    p.add_argument("--size", help="total size, e.g. 2GB")
    p.add_argument("--samples", type=int, help="number of samples instead of --size")
    p.add_argument("--seed", type=int, default=0)
    _add_shard_arguments(p)


def synth_command(args: argparse.Namespace, console: Console) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from iobench.host.units import format_bytes

    from .synth import synthesize

    if (args.size is None) == (args.samples is None):
        raise ValueError("give exactly one of --size (e.g. 2GB) or --samples (e.g. 10000)")
    size_bytes = _size(args.size, "--size")  # both read before the bar starts
    shard_bytes = _shard_bytes(args)
    with Progress(
        TextColumn("synth"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=console
    ) as bar:
        task = bar.add_task("synth", total=None)
        manifest = synthesize(
            args.out,
            size_bytes=size_bytes,
            samples=args.samples,
            seed=args.seed,
            shard_bytes=shard_bytes,
            format=args.format,
            row_group=args.row_group,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    console.print(
        f"{manifest.num_samples} samples in {len(manifest.shards)} shards, {format_bytes(manifest.total_bytes)}, "
        f"mean JPEG {manifest.mean_sample_bytes / 1024:.1f} KiB -> {args.out}"
    )
    _say_shard_size(args, manifest, console)
    return 0


def _size(text: str | None, flag: str) -> int | None:
    """``text`` (a flag's value) in bytes; an error names the flag."""
    from iobench.host.units import parse_size

    if text is None:
        return None
    try:
        return parse_size(text)
    except ValueError as exc:
        raise ValueError(f"{flag} {text}: {exc}") from None


def _shard_bytes(args: argparse.Namespace) -> int | None:
    """--shard-size in bytes; None (the default) lets synth and pack choose from this host's cores."""
    return _size(args.shard_size, "--shard-size")


def _say_shard_size(args: argparse.Namespace, manifest: Manifest, console: Console) -> None:
    if args.shard_size is None:
        from .shardsize import describe_auto

        console.print(describe_auto(manifest.source["shard_bytes"], len(manifest.shards)), highlight=False)


def add_pack_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("imagefolder")
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=0, help="shuffle seed for the sample order")
    _add_shard_arguments(p)


def pack_command(args: argparse.Namespace, console: Console) -> int:
    from iobench.host.units import format_bytes

    from .pack import KEYMAP_NAME, pack_imagefolder

    manifest = pack_imagefolder(
        args.imagefolder,
        args.out,
        shard_bytes=_shard_bytes(args),
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
    _say_shard_size(args, manifest, console)
    return 0


def add_objects_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", help="local dataset directory (with manifest.json)")


def objects_command(args: argparse.Namespace, console: Console) -> int:
    from iobench.host.units import format_bytes

    from .objects import explode

    samples = explode(args.dataset)
    console.print(
        f"{len(samples)} objects ({format_bytes(sum(s['bytes'] for s in samples))}) in {args.dataset}/objects; "
        "`iobench dataset upload` uploads them with the shards"
    )
    return 0


def add_index_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", help="dataset directories (every *.tar in them) or tar shards")


def index_command(args: argparse.Namespace, console: Console) -> int:
    from pathlib import Path

    from .wdsindex import write_wds_index

    tars = []
    for given in map(Path, args.paths):
        found = sorted(given.glob("*.tar")) if given.is_dir() else [given]
        if not found or not all(t.is_file() for t in found):
            raise ValueError(f"{given}: no tar shards there (give a dataset directory or .tar files)")
        tars += found
    for tar in tars:
        write_wds_index(tar)
    console.print(f"wrote {len(tars)} index file(s) (.idx beside each shard)", highlight=False)
    return 0


def add_upload_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", help="local dataset directory (with manifest.json)")
    p.add_argument(
        "url", help="s3://bucket/prefix, rados://pool/prefix (pool created when missing) or a CephFS path"
    )
    p.add_argument("--endpoint-url", help="S3 endpoint (default AWS_ENDPOINT_URL)")
    p.add_argument("--profile", help="AWS profile for the credentials (default: environment)")
    p.add_argument("--workers", type=int, default=4, help="objects uploaded in parallel")
    p.add_argument(
        "--verify", choices=("metadata", "full"), default="metadata", help="full: read every object back"
    )
