"""`iobench dataset upload`: put a local dataset on a tier (its arguments: iobench/datasets/cli.py,
which the parser imports; this module only when the command runs, as it pulls in the tiers)."""

from __future__ import annotations

import argparse

from rich.console import Console


def upload_command(args: argparse.Namespace, console: Console) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from iobench.host.units import format_bytes

    if "://" not in args.url:  # a mounted path: CephFS (or any shared file system it checks)
        from . import make_tier

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
