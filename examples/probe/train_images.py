"""A plain PyTorch training script over an ImageFolder-style tree of JPEGs, decoded with PIL in
``__getitem__``: the ground truth ``iobench probe`` is checked against. It never imports iobench.

Three jobs, each bound by a different part (docs/probe.md):

    # decode-bound: one worker decoding, a tiny model
    python examples/probe/train_images.py TREE --workers 1 --batch-size 32 --model tiny
    # slow store: two workers whose __getitem__ waits 40 ms before it reads
    python examples/probe/train_images.py TREE --workers 2 --batch-size 16 --model tiny --store-ms 40
    # compute-bound: a wide CNN on small batches
    python examples/probe/train_images.py TREE --workers 2 --batch-size 8 --model wide

``--alone loader`` measures its loader alone (the DataLoader iterated, nothing consuming) and
``--alone step`` its step alone (one batch, stepped on again and again): each prints one JSON line,
the rate the probe's ceilings are checked against. ``--ddp`` trains data-parallel under torchrun
(gloo, a DistributedSampler).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader, Dataset, DistributedSampler

CLASSES = 10  # labels are folded onto 10 classes: the model's head stays small


class JpegFolder(Dataset):
    """``root/<class>/*.jpg``, each read, decoded with PIL and resized in ``__getitem__``; with
    ``store_ms`` each read first waits that long, as a slow store would."""

    def __init__(self, root: str, size: int, store_ms: float) -> None:
        self.root = root
        classes = sorted(d.name for d in Path(root).iterdir() if d.is_dir())
        self.samples = [
            (str(p), label) for label, c in enumerate(classes) for p in sorted((Path(root) / c).glob("*.jpg"))
        ]
        self.classes = min(CLASSES, len(classes))
        self.size = size
        self.store_s = store_ms / 1000.0

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[i]
        if self.store_s:
            time.sleep(self.store_s)
        with open(path, "rb") as f:
            data = f.read()
        image = Image.open(io.BytesIO(data)).convert("RGB").resize((self.size, self.size), Image.BILINEAR)
        x = torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1).float().div_(255.0)
        return x, label % self.classes


def model_of(kind: str, size: int, classes: int) -> nn.Module:
    if kind == "tiny":
        return nn.Sequential(nn.Flatten(), nn.Linear(3 * size * size, classes))
    return nn.Sequential(  # wide: most of its time in a 64-to-128-channel convolution at full size
        nn.Conv2d(3, 64, 3, padding=1),
        nn.ReLU(inplace=True),
        nn.Conv2d(64, 128, 3, padding=1),
        nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(128, classes),
    )


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--size", type=int, default=64, help="images are resized to SIZE x SIZE")
    p.add_argument("--model", choices=("tiny", "wide"), default="tiny")
    p.add_argument("--store-ms", type=float, default=0.0, help="wait before each read, a slow store")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps", type=int, default=None, help="stop after this many steps")
    p.add_argument("--settle", type=int, default=10, help="steps before the job's own rate is timed")
    p.add_argument("--context", choices=("fork", "spawn", "forkserver"), default=None)
    p.add_argument("--alone", choices=("loader", "step"), help="measure the loader or the step alone")
    p.add_argument("--seconds", type=float, default=8.0, help="how long --alone measures")
    p.add_argument("--ddp", action="store_true", help="data-parallel under torchrun (gloo)")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    torch.manual_seed(0)
    rank, world = 0, 1
    if args.ddp:
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    dataset = JpegFolder(args.root, args.size, args.store_ms)
    sampler: DistributedSampler | None = DistributedSampler(dataset, shuffle=True) if args.ddp else None
    loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        shuffle=sampler is None,
        sampler=sampler,
        num_workers=args.workers,
        multiprocessing_context=args.context if args.workers else None,
        drop_last=True,
    )
    model = model_of(args.model, args.size, dataset.classes)
    if args.ddp:
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(x: torch.Tensor, y: torch.Tensor) -> None:
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        optimizer.step()

    if args.alone == "loader":
        print(
            json.dumps({"alone": "loader", "samples_per_s": loader_alone(loader, args.seconds)}), flush=True
        )
        return
    if args.alone == "step":
        x, y = next(iter(loader))
        print(
            json.dumps({"alone": "step", "samples_per_s": step_alone(step, x, y, args.seconds)}), flush=True
        )
        return

    steps = samples = 0
    start = time.perf_counter()  # restarted after the first --settle steps
    for epoch in range(args.epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        for x, y in loader:
            step(x, y)
            steps += 1
            if steps == args.settle:
                samples, start = 0, time.perf_counter()
            else:
                samples += len(y)
            if args.steps is not None and steps >= args.steps:
                break
        if args.steps is not None and steps >= args.steps:
            break
    seconds = time.perf_counter() - start
    if rank == 0:  # the job's own rate, after its first steps: what the probe's overhead is read on
        print(json.dumps({"trained": steps, "samples_per_s": samples * world / seconds}), flush=True)
    if args.ddp:
        dist.destroy_process_group()


def loader_alone(loader: DataLoader, seconds: float, settle: int = 4, settle_s: float = 3.0) -> float:
    """Samples/s of the DataLoader with nothing consuming, after its first batches and seconds (a
    worker started by spawn or forkserver runs slowly for its first seconds: imports, first files)."""
    batches = iter(loader)
    start = time.perf_counter()
    taken = 0
    while taken < settle or time.perf_counter() - start < settle_s:
        next(batches)
        taken += 1
    samples, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        try:
            samples += len(next(batches)[1])
        except StopIteration:
            batches = iter(loader)
    return samples / (time.perf_counter() - start)


def step_alone(step, x: torch.Tensor, y: torch.Tensor, seconds: float, settle: int = 3) -> float:  # type: ignore[no-untyped-def]
    """Samples/s of the training step on one batch, again and again: the batch over the median step
    (a step that a busy host preempts once runs many times as long; the median is the step itself).
    Ranks in step (DDP) take the same number of steps: every rank's all-reduce has its peer's."""
    for _ in range(settle):
        step(x, y)
    t0 = time.perf_counter()
    step(x, y)
    steps = torch.tensor([max(10, int(seconds / max(1e-6, time.perf_counter() - t0)))])
    if dist.is_initialized():
        dist.all_reduce(steps, op=dist.ReduceOp.MIN)
    times: list[float] = []
    for _ in range(int(steps.item())):
        t0 = time.perf_counter()
        step(x, y)
        times.append(time.perf_counter() - t0)
    return len(y) / statistics.median(times)


if __name__ == "__main__":
    main()
