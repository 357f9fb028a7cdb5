"""A plain PyTorch training loop fed by NVIDIA DALI's PyTorch iterator (a CPU pipeline here, GPU
"mixed" decode where there is a GPU): the probe times the loop's waits on DALI's iterator; DALI's own
stages run in its threads. It never imports iobench.

    python examples/probe/train_dali.py TREE [--threads 1] [--batch-size 32] [--steps 200]
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F
from nvidia.dali import fn, pipeline_def
from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy
from torch import nn


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--steps", type=int, default=200)
    args = p.parse_args()
    gpu = torch.cuda.is_available()

    @pipeline_def(batch_size=args.batch_size, num_threads=args.threads, device_id=0 if gpu else None)
    def images():
        jpegs, labels = fn.readers.file(file_root=args.root, random_shuffle=True, name="files")
        decoded = fn.decoders.image(jpegs, device="mixed" if gpu else "cpu")
        resized = fn.resize(decoded, resize_x=args.size, resize_y=args.size)
        return fn.transpose(resized, perm=[2, 0, 1]), labels

    pipe = images()
    pipe.build()
    loader = DALIGenericIterator(
        [pipe], ["x", "y"], reader_name="files", last_batch_policy=LastBatchPolicy.DROP
    )
    device = "cuda" if gpu else "cpu"
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * args.size * args.size, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = samples = 0
    start = time.perf_counter()
    while steps < args.steps:
        for batch in loader:
            x = batch[0]["x"].float().div_(255.0)
            y = batch[0]["y"].squeeze(-1).long().remainder(10).to(device)
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            steps += 1
            samples += len(y)
            if steps == 10:
                samples, start = 0, time.perf_counter()
            if steps >= args.steps:
                break
    print(
        json.dumps({"trained": steps, "samples_per_s": samples / (time.perf_counter() - start)}), flush=True
    )


if __name__ == "__main__":
    main()
