"""One short check of the whole GPU path (< 3 min on any CUDA machine).

    python scripts/gpu_check.py               # needs CUDA: nvJPEG via DALI "mixed", ResNet-50 AMP step
    python scripts/gpu_check.py --cpu-smoke   # the same code paths on CPU: DALI cpu, small CNN, no pinning

It makes a small synthetic ImageNet-like dataset in a temporary directory, then feeds the same
training step from (a) our torch DataLoader path with CPU decode (pinned memory + ``h2d``) and
(b) the DALI backend (decode on the GPU), and prints samples/s, accelerator utilisation (AU = the
GPU's busy time from CUDA events / wall; on CPU the step's own time), stall fraction and the p99
wait per loader, the host's step time against the step alone (the model is warmed up and timed
alone before any loader, so no loader's window carries cuDNN's autotuning), with NVML telemetry
(GPU utilisation, memory, PCIe TX/RX) when ``pynvml`` is importable.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Result:
    loader: str
    samples: int
    wall_s: float
    compute_s: float  # host wall time of the steps (synchronised with the device)
    device_busy_s: float  # the steps' CUDA event spans, each capped at the step's span alone
    wait_s: float
    wait_p99_ms: float
    h2d_s: float
    batches: int
    step_median_s: float
    telemetry: dict

    @property
    def rate(self) -> float:
        return self.samples / self.wall_s if self.wall_s > 0 else 0.0


def gpu_telemetry(telemetry, start: float, end: float) -> dict:
    """NVML's figures between two instants (iobench.cell.telemetry samples them): mean utilisation,
    peak memory, mean PCIe TX/RX in MB/s; empty without NVML."""
    gpus = [g for s in telemetry.between(start, end) for g in s.gpus]
    if not gpus:
        return {}
    tx = [g.pcie_tx_bytes_per_s for g in gpus if g.pcie_tx_bytes_per_s is not None]
    rx = [g.pcie_rx_bytes_per_s for g in gpus if g.pcie_rx_bytes_per_s is not None]
    return {
        "gpu_util_pct": telemetry.mean_gpu_utilization(start, end),
        "mem_used_mib_max": max(g.memory_used_bytes for g in gpus) / 2**20,
        "pcie_tx_mb_s": sum(tx) / len(tx) / 1e6 if tx else 0.0,
        "pcie_rx_mb_s": sum(rx) / len(rx) / 1e6 if rx else 0.0,
    }


def step_alone(step, batch_size: int, image_size: int = 224):
    """The model warmed up (allocator, cuDNN autotuning) and timed alone on a synthetic batch,
    before any loader runs, so no loader's window carries the warm-up."""
    import torch

    from iobench.accelerators.alone import time_alone

    images = torch.randint(0, 256, (batch_size, 3, image_size, image_size), dtype=torch.uint8)
    labels = torch.zeros(batch_size, dtype=torch.int64)
    x, y, _ = step.h2d(images, labels)
    return time_alone(step, x, y, min_steps=10, min_seconds=2.0)


def run_loader(name: str, loader, step, alone, warmup: int) -> Result:
    import statistics

    from iobench.cell.telemetry import TelemetrySampler
    from loaders import StallMeter

    meter = StallMeter(loader)
    compute = h2d_total = busy = 0.0
    steps: list[float] = []
    samples = 0
    waits_after: list[float] = []
    started = None
    cap = alone.device_s if alone.device_s is not None else float("inf")
    with TelemetrySampler(interval=0.1) as telemetry:
        for i, batch in enumerate(meter):
            images, labels = (batch.images, batch.labels) if hasattr(batch, "images") else batch
            x, y, h2d = step.h2d(images, labels)
            c = step.step(x, y)
            if i < warmup:
                continue
            if started is None:
                started = time.perf_counter() - meter.waits[-1] - h2d - c
            waits_after.append(meter.waits[-1])
            compute += c
            steps.append(c)
            busy += min(step.last_device_s, cap)
            h2d_total += h2d
            samples += len(labels)
    end = time.perf_counter()
    wall = end - (started or end)
    waits_ms = sorted(w * 1000 for w in waits_after) or [0.0]
    p99 = waits_ms[min(len(waits_ms) - 1, int(0.99 * len(waits_ms)))]
    return Result(
        name,
        samples,
        wall,
        compute,
        busy,
        sum(waits_after),
        p99,
        h2d_total,
        len(waits_after),
        statistics.median(steps) if steps else 0.0,
        gpu_telemetry(telemetry, started or end, end),
    )


def print_table(results: list[Result], gpu: bool, alone) -> None:
    """AU is the device's busy time over the wall (CUDA events; on CPU the step itself); the host
    step is the step's wall time, its slowdown against the step alone."""
    head = (
        f"{'loader':<34} {'samples/s':>10} {'AU':>6} {'stall':>6} {'wait p99 ms':>12} {'h2d ms/b':>9}"
        f" {'host step ms':>12} {'x alone':>8}"
    )
    if gpu:
        head += f" {'GPU%':>5} {'mem MiB':>8} {'PCIe TX/RX MB/s':>16}"
    print(head)
    print("-" * len(head))
    for r in results:
        n_batches = max(1, r.batches)
        line = (
            f"{r.loader:<34} {r.rate:>10.1f} {r.device_busy_s / r.wall_s:>6.1%} {r.wait_s / r.wall_s:>6.1%}"
            f" {r.wait_p99_ms:>12.1f} {1000 * r.h2d_s / n_batches:>9.2f}"
            f" {1000 * r.step_median_s:>12.1f} {r.step_median_s / alone.step_s:>8.2f}"
        )
        t = r.telemetry
        if gpu and t:
            line += (
                f" {t['gpu_util_pct']:>5.0f} {t['mem_used_mib_max']:>8.0f}"
                f" {t['pcie_tx_mb_s']:>7.0f}/{t['pcie_rx_mb_s']:<8.0f}"
            )
        print(line)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu-smoke", action="store_true", help="run the same paths on CPU (for CI)")
    ap.add_argument("--samples", type=int, help="synthetic samples (default 2000; 192 with --cpu-smoke)")
    ap.add_argument("--batch-size", type=int, help="default 128 (32 with --cpu-smoke)")
    ap.add_argument("--workers", type=int, help="loader workers / DALI threads (default min(8, cores))")
    ap.add_argument("--data", help="reuse (or create) the dataset here instead of a temp dir")
    return ap.parse_args(argv)


def _why_not(gpu: bool) -> str | None:
    """What keeps the check from running on this machine, as the line to print; None if nothing does."""
    import torch

    if gpu and not torch.cuda.is_available():
        return (
            "gpu_check: no CUDA device visible to torch (torch.cuda.is_available() is False; torch "
            f"{torch.__version__}, CUDA build {torch.version.cuda}). Run it on a CUDA machine, or use "
            "--cpu-smoke to exercise the same code paths on CPU."
        )
    try:
        from loaders.backends.dali import cuda_devices, dali_available
    except ImportError as exc:
        return f"gpu_check: {exc}"
    if not dali_available():
        return "gpu_check: NVIDIA DALI is not installed: pip install 'iobench[dali]'"
    if gpu and cuda_devices() == 0:
        return "gpu_check: torch sees CUDA but DALI does not (driver too old for this DALI wheel?)"
    return None


def _shards(data: Path, samples: int) -> list[str]:
    """A synthetic ImageNet-like dataset in ``data`` (about 16 shards); its shard paths."""
    from iobench.datasets.synth import synthesize

    t0 = time.perf_counter()
    synthesize(data, samples=samples, seed=1, shard_bytes=max(2_000_000, samples * 120_000 // 16))
    urls = sorted(str(p) for p in data.glob("train-*.tar"))
    print(f"dataset: {samples} samples in {len(urls)} shards, {time.perf_counter() - t0:.1f} s ({data})")
    return urls


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    gpu = not args.cpu_smoke
    why = _why_not(gpu)
    if why:
        print(why, file=sys.stderr)
        return 2

    from iobench.accelerators.consumers import TorchTrainStep
    from loaders import ShardLoader
    from loaders.backends.dali import DaliLoader

    samples = args.samples or (192 if args.cpu_smoke else 2000)
    batch_size = args.batch_size or (32 if args.cpu_smoke else 128)
    workers = args.workers or max(1, min(8, os.cpu_count() or 1))
    device = "cuda" if gpu else "cpu"
    model = "resnet50" if gpu else "small_cnn"

    with tempfile.TemporaryDirectory(prefix="iobench-gpu-check-") as tmp:
        urls = _shards(Path(args.data or tmp), samples)
        step = TorchTrainStep(model, device=device, threads=None if gpu else 1)
        print(f"step: {step.describe()}")
        alone = step_alone(step, batch_size)
        busy = (
            f", GPU busy {1000 * alone.device_s:.1f} ms (CUDA events)" if alone.device_s is not None else ""
        )
        print(f"step alone (warmed up, before any loader): host {1000 * alone.step_s:.1f} ms{busy}")
        results = []

        torch_loader = ShardLoader(
            urls, batch_size=batch_size, workers=workers, pin_memory=gpu, shuffle_buffer=256
        )
        results.append(run_loader("torch DataLoader (CPU decode)", torch_loader, step, alone, warmup=2))

        cfg = _config(urls, batch_size, workers, device)
        dali = DaliLoader(cfg)
        label = f"DALI {dali.decode_device} ({'nvJPEG' if dali.decode_device == 'mixed' else 'CPU'})"
        results.append(run_loader(label, dali, step, alone, warmup=2))
        dali.close()

        print()
        print_table(results, gpu, alone)
        stats = dali.stats.per_sample_ms("wall")
        print(
            f"\nDALI per-sample ms (wall): decode(graph)={stats['decode']:.2f}; bytes read {dali.stats.bytes_read}"
        )
    return 0


def _config(urls: list[str], batch_size: int, workers: int, device: str):
    from loaders.config import LoaderConfig

    return LoaderConfig(
        urls=urls,
        batch_size=batch_size,
        workers=workers,
        shuffle_buffer=256,
        device=device,
        options={"mode": "reader"},
    )


if __name__ == "__main__":
    sys.exit(main())
