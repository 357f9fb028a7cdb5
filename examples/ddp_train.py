"""Data-parallel training with the drop-in loaders: a small CNN under DDP, one process per GPU (or
CPU rank), started by torchrun. gloo on the CPU, NCCL on CUDA.

    torchrun --standalone --nproc-per-node 2 examples/ddp_train.py \\
        --shards '/data/in1k-shards/train-{000000..000127}.tar' --epochs 2

The lines marked ``# loaders:`` are all it takes to adopt them: the rank and world size come from
torch.distributed, every rank yields exactly ``len(loader)`` batches per epoch whatever the shard
sizes (so no rank waits for ever in the all-reduce of an epoch's last step), and ``set_epoch``
reorders the shards as a DistributedSampler would. ``--record DIR`` writes what each rank took, step
by step (tests/e2e/test_ddp_example.py reads it).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from loaders import AugmentSpec, ShardLoader, normalize_batch  # loaders: the import


class SmallCNN(nn.Module):
    """Three convolutions and a linear head: enough to train, small enough for a CPU."""

    def __init__(self, classes: int) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, 3, stride=2, padding=1),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shards", required=True, help="WebDataset shards: a path with {000000..000127} ranges")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--workers", type=int, default=4, help="DataLoader workers per rank")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--mp-context", choices=("fork", "forkserver", "spawn"), default=None)
    p.add_argument("--record", type=Path, default=None, help="a directory: one JSON-lines file per rank")
    p.add_argument("--cache-dir", default=None, help="a local shard cache in front of s3:// shards")
    p.add_argument(
        "--max-lost-fraction",
        type=float,
        default=0.001,
        help="the loss budget: an epoch that loses more of its samples (corrupt, or in a damaged shard) fails",
    )
    p.add_argument(
        "--shard-samples",
        type=Path,
        default=None,
        help="a JSON file {shard url: samples}: remote shards' counts, which the even split over ranks needs",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local_rank}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)

    loader = ShardLoader(  # loaders: one loader per rank; rank and world size from torch.distributed
        args.shards,
        batch_size=args.batch_size,
        workers=args.workers,
        augment=AugmentSpec(size=args.image_size),
        multiprocessing_context=args.mp_context,
        return_batches=True,  # Batch objects: images, labels, and each sample's key
        cache_dir=args.cache_dir,
        max_lost_fraction=args.max_lost_fraction,  # loaders: past it, SamplesLostError names the shard
        shard_samples=json.loads(args.shard_samples.read_text()) if args.shard_samples else {},
    )
    model = DistributedDataParallel(
        SmallCNN(args.classes).to(device), device_ids=[local_rank] if cuda else None
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    log = open(args.record / f"rank{rank}.jsonl", "w") if args.record else None  # noqa: SIM115

    for epoch in range(args.epochs):
        loader.set_epoch(epoch)  # loaders: a new shard order every epoch, the same on every rank
        steps, started, loss = 0, time.perf_counter(), torch.zeros(())
        for batch in loader:
            x = normalize_batch(batch.images.to(device, non_blocking=True))
            y = batch.labels.to(device, non_blocking=True)
            loss = F.cross_entropy(model(x), y % args.classes)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # DDP's gradient all-reduce: every rank must take this step
            optimizer.step()
            if log:
                record = {"rank": rank, "epoch": epoch, "step": steps, "keys": batch.keys}
                log.write(json.dumps({**record, "labels": batch.labels.tolist()}) + "\n")
            steps += 1
        # the loader's promise, checked across ranks: every rank took len(loader) steps
        counts = torch.tensor([steps, len(loader)], device=device)
        gathered = [torch.zeros_like(counts) for _ in range(world)]
        dist.all_gather(gathered, counts)
        if log:
            summary: dict[str, Any] = {"rank": rank, "epoch": epoch, "steps": steps, "len": len(loader)}
            tally = loader.tallies[-1]  # what this rank's epoch should have delivered, and did
            summary["samples"] = {
                "expected": tally.expected,
                "delivered": tally.delivered,
                "lost": tally.lost,
            }
            summary["counters"] = loader.stats.counters.as_flat()
            log.write(json.dumps({**summary, "all": [g.tolist() for g in gathered]}) + "\n")
            log.flush()
        if rank == 0:
            seconds = time.perf_counter() - started
            print(
                f"epoch {epoch}: {steps} steps per rank on {world} rank(s) in {seconds:.1f} s, loss {loss.item():.3f}"
            )

    if log:
        log.close()
    loader.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
