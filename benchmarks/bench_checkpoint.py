"""Checkpoint saves and restores on the local disk: iobench's DCP writer and reader (O_DIRECT and
buffered) and PyTorch's stock FileSystemWriter/Reader against fio's direct sequential write and read
of the same bytes on the same device, interleaved in each round.

Every save ends durable (fsync; fio's end_fsync) and every cold restore starts after the page cache
was dropped (as root, drop_caches; MLPerf Storage's rule between write and read). The warm restore
reads the same checkpoint again at once (an O_DIRECT reader bypasses the cache: warm is cold for it).

    python benchmarks/bench_checkpoint.py [--size 1GiB] [--rounds 5] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import warnings
from collections.abc import Callable

from common import REPO, host_line, interleaved, median, paired, spread, write_section

from iobench.checkpoint.fioref import fio_reference
from iobench.checkpoint.state import synthetic_state
from iobench.checkpoint.targets import make_target
from iobench.checkpoint.timing import timed_load, timed_save
from iobench.host.units import format_bytes, parse_size
from iobench.results.checkpoint import CheckpointDestination
from iobench.results.choices import CheckpointIo, CheckpointWriter

warnings.filterwarnings("ignore", message=".*single process.*")

WRITERS: dict[str, tuple[CheckpointWriter, CheckpointIo]] = {
    "iobench O_DIRECT": ("iobench", "direct"),
    "iobench buffered": ("iobench", "buffered"),
    "torch FileSystemWriter (2 threads, fsync)": ("stock", "buffered"),
}
FIO = "fio direct (libaio, 4 MiB, depth 8)"


def _contenders(root: str, state: dict, size: int) -> dict[str, Callable[[], tuple[float, float, float]]]:
    def fio_round() -> tuple[float, float, float]:
        fio = fio_reference(root, size)
        assert fio is not None  # main() checked fio is there
        return fio.write_gb_per_s * 1e9, fio.read_gb_per_s * 1e9, fio.read_gb_per_s * 1e9

    def writer_round(writer: CheckpointWriter, io: CheckpointIo) -> Callable[[], tuple[float, float, float]]:
        def run() -> tuple[float, float, float]:
            where = os.path.join(root, f"{writer}-{io}")
            shutil.rmtree(where, ignore_errors=True)
            target = make_target(
                CheckpointDestination("bench", {"kind": "local", "path": root}, where, writer, io)
            )
            saved = timed_save(target, state, "ckpt")
            cold, _ = timed_load(target, state, "ckpt", cold=True)
            warm, _ = timed_load(target, state, "ckpt", cold=False)
            shutil.rmtree(where, ignore_errors=True)
            return saved.bytes / saved.seconds, cold.bytes / cold.seconds, warm.bytes / warm.seconds

        return run

    return {FIO: fio_round, **{name: writer_round(*how) for name, how in WRITERS.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default=str(REPO.parent / "runs" / "checkpoint-bench"))
    args = ap.parse_args()
    if not shutil.which("fio"):
        raise SystemExit("fio is not installed: apt-get install -y fio")
    if os.geteuid() != 0:
        raise SystemExit("the cold restores drop the page cache: run as root")
    size = parse_size(args.size)
    os.makedirs(args.dir, exist_ok=True)
    state = synthetic_state(size)
    nbytes = sum(t.numel() * t.element_size() for t in state.values() if hasattr(t, "numel"))
    fio_size = nbytes // (4 << 20) * (4 << 20)
    results = interleaved(_contenders(args.dir, state, fio_size), args.rounds, warmup=1)
    fio = results[FIO]
    rows = []
    for name, values in results.items():
        save, cold, warm = ([v[i] for v in values] for i in range(3))
        x_write = paired(save, [f[0] for f in fio])
        x_read = paired(cold, [f[1] for f in fio])
        rows.append(
            f"| {name} | {median(save) / 1e6:,.0f} MB/s | {spread(save):.0f} % | {x_write:.2f} | "
            f"{median(cold) / 1e6:,.0f} MB/s | {x_read:.2f} | {median(warm) / 1e6:,.0f} MB/s |"
        )
        print(name, "save", [round(v / 1e6) for v in save], "cold", [round(v / 1e6) for v in cold])
    ours = paired([v[0] for v in results["iobench O_DIRECT"]], [f[0] for f in fio])
    ours_read = paired([v[1] for v in results["iobench O_DIRECT"]], [f[1] for f in fio])
    stock = paired([v[0] for v in results[list(WRITERS)[2]]], [f[0] for f in fio])
    body = f"""## Checkpoints on the local disk against fio (`python benchmarks/bench_checkpoint.py --size {args.size} --rounds {args.rounds}`)

{host_line()}. A synthetic training state of {format_bytes(nbytes)} (bf16 weights, fp32 Adam moments, 64 MiB
layers: {len(state) - 1} tensors, one process), saved with `torch.distributed.checkpoint` to {args.dir} (ext4
on the VM's virtio disk) and restored into fresh tensors; fio writes and reads the same bytes on the same
file system. {args.rounds} interleaved rounds after a warm-up round; medians; the ratios are medians of the
per-round ratios. Every save ends fsync'd; every cold restore and fio's read start after drop_caches. The
"fio" row's restore columns are its direct read.

| writer / reader | save | spread | × fio direct write | restore, cold | × fio direct read | restore, warm |
|---|---:|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

Goal: iobench's O_DIRECT save ≥ 0.8 × fio's direct write — {ours:.2f}, {"met" if ours >= 0.8 else "not met"} in this run
(its restore {ours_read:.2f} × fio's direct read; the stock writer {stock:.2f} × fio's write). iobench's writer
keeps 8 requests of up to 8 MiB in flight from page-aligned buffers (straight from a tensor's memory when it is
aligned), preallocates each part so the requests overlap on the device, checks every request with CRC32C on
restore, and commits only after the whole write (`.metadata` last, one rename).
"""
    write_section("checkpoint", body)
    print(body)


if __name__ == "__main__":
    main()
