"""``iobench checkpoint mlperf``: MLPerf Storage's checkpointing workload on a destination (a
directory, s3://bucket/prefix or rados://pool/prefix), one process per rank, reported as MLPerf
Storage reports it. Cheap to import: the work loads torch when it runs."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from iobench.results.choices import CheckpointIo, CheckpointWriter, values

if TYPE_CHECKING:
    from iobench.results.checkpoint import CheckpointDestination

RANKS = {"llama3-8b": 8, "llama3-70b": 64, "llama3-405b": 512, "llama3-1t": 1024}


def add_checkpoint_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", required=True, choices=sorted(RANKS), help="MLPerf Storage's checkpointing models"
    )
    p.add_argument(
        "--to", required=True, metavar="WHERE", help="a directory, s3://bucket/prefix or rados://pool/prefix"
    )
    p.add_argument(
        "--ranks", type=int, help="processes (default: MLPerf Storage's for the model, at most 8 here)"
    )
    p.add_argument(
        "--size", metavar="SIZE", help="bytes per checkpoint (default: the model's, scaled to this host)"
    )
    p.add_argument("--writer", choices=values(CheckpointWriter), default="iobench")
    p.add_argument(
        "--io", choices=values(CheckpointIo), default="direct", help="a directory: O_DIRECT or buffered"
    )
    p.add_argument(
        "--writes", type=int, default=1, help="checkpoints written (MLPerf: num-checkpoints-write)"
    )
    p.add_argument(
        "--reads", type=int, default=1, help="checkpoints read back (MLPerf: num-checkpoints-read)"
    )
    p.add_argument("--out", type=Path, help="write the summary JSON here too")
    p.add_argument("--json", action="store_true", help="print the summary JSON")


def destination_of(where: str, writer: CheckpointWriter, io: CheckpointIo) -> CheckpointDestination:
    from iobench.results.checkpoint import CheckpointDestination

    if where.startswith("s3://"):
        tier = {"kind": "s3", "url": where, "client": "s3fs"}
    elif where.startswith("rados://"):
        tier = {"kind": "rados", "url": where}
    else:
        where = str(Path(where).expanduser().resolve())
        tier = {"kind": "local", "path": where}
    return CheckpointDestination("mlperf", tier, where, writer, io)


def checkpoint_command(args: argparse.Namespace, console: Console) -> int:
    from iobench.host.memory import usable_memory
    from iobench.host.units import format_bytes, parse_size
    from iobench.results.codec import to_json

    from .mlperf import MlperfSpec
    from .sizes import MODELS, state_size

    ranks = args.ranks or min(RANKS[args.model], 8)
    size = state_size(args.model, None, usable_memory().total, copies=1)
    chosen = parse_size(args.size) if args.size else size.bytes
    spec = MlperfSpec(
        args.model,
        ranks,
        chosen,
        MODELS[args.model].checkpoint_bytes,
        destination_of(args.to, args.writer, args.io),
        args.writes,
        args.reads,
    )
    with tempfile.TemporaryDirectory(prefix="iobench-mlperf-") as tmp:
        spec_path, out_path = Path(tmp) / "spec.json", Path(tmp) / "out.json"
        spec_path.write_text(json.dumps(to_json(spec)))
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={ranks}",
            "-m",
            "iobench.checkpoint.mlperf",
            str(spec_path),
            str(out_path),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode or not out_path.exists():
            console.print(f"the checkpointing run failed:\n{proc.stderr[-3000:]}", markup=False)
            return 1
        result = json.loads(out_path.read_text())
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    if args.json:
        print(json.dumps(result, indent=2), file=console.file)
        return 0
    said = (
        f"{format_bytes(chosen)} of its {format_bytes(spec.full_bytes)} ({chosen / spec.full_bytes:.2%}"
        + (", what this host can hold)" if chosen < spec.full_bytes and not args.size else ")")
    )
    console.print(
        f"MLPerf Storage checkpointing, {args.model}: {ranks} processes (MLPerf: {RANKS[args.model]}), {said}, to {args.to} with {result['writer']}",
        markup=False,
    )
    for p in result["phases"]:
        console.print(
            f"  {p['what']} {p['index']}: {p['duration_s']:.2f} s, {p['throughput_gb_per_s']:.2f} GB/s"
            + (f" (cold: {p['cold']})" if p["cold"] else ""),
            markup=False,
        )
    return 0
