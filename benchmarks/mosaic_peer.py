"""mosaicml-streaming as a peer loader, run in its own virtual environment.

    .venv-mosaic/bin/python benchmarks/mosaic_peer.py --shards A.tar B.tar ... \\
        --mds-dir /tmp/iobench-mds-3072 [--workers 2] [--batch 64] [--runs 1]

``benchmarks/setup_mosaic_venv.sh`` builds the
environment: streaming pins numpy < 2.2 and requires torchvision, so it cannot share iobench's.

What it does, the same way as the peers in ``peers.py``:

1. converts the WebDataset tar shards to streaming's MDS format with streaming's own ``MDSWriter``
   (columns jpg: bytes, cls: int, no compression, 64 MB shards like litdata's chunks), once: the MDS
   directory is a cache, written only when missing;
2. runs one epoch of a ``StreamingDataset(local=<mds dir>, shuffle=False, batch_size=B)`` subclass
   whose ``__getitem__`` returns ``(peers.decode_augment(jpg, rng), cls)``, through a
   ``torch.utils.data.DataLoader`` with W workers, batch size B, ``peers.collate`` and one torch
   thread per worker, timed from the construction of the dataset and loader to the last batch,
   and checks that exactly the converted number of samples arrived;
3. prints one JSON line a run: ``{"samples": N, "seconds": s, "samples_per_s": r, "cpu_s": c}``,
   ``cpu_s`` the CPU time of this process and its joined workers over the epoch alone.

``--runs 0`` only converts. bench_loaders.py runs it this way (see there).

Import of streaming: ``import streaming`` runs ``streaming/__init__.py``, which imports the
``streaming.vision`` dataset zoo and with it torchvision; the torchvision wheel PyPI has for this
torch is a CUDA build whose ops library links libtorch_cuda.so, which the CPU torch lacks, so it
fails with "operator torchvision::nms does not exist". The classes used here live in
``streaming.base``, which needs no torchvision (``streaming.StreamingDataset`` *is*
``streaming.base.StreamingDataset``), so ``_import_streaming`` registers the installed package
directory as ``streaming`` without running its ``__init__`` and imports ``streaming.base`` from it:
all of streaming's own code for the format, the dataset and its worker partitioning runs unchanged.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import sys
import time
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # peers.py, and the repo's loaders package

import torch  # noqa: E402
from common import cpu_seconds  # noqa: E402
from peers import collate, decode_augment, shard_samples  # noqa: E402

SOURCE = "iobench-source.json"  # written last into the MDS directory: what it was converted from


def _import_streaming() -> types.ModuleType:
    """streaming.base, without streaming/__init__.py (which imports torchvision): see the docstring."""
    if "streaming" not in sys.modules:
        spec = importlib.util.find_spec("streaming")  # finds the package, runs none of it
        if spec is None or spec.submodule_search_locations is None:
            raise ImportError("mosaicml-streaming is not installed in this environment")
        pkg = types.ModuleType("streaming")
        pkg.__path__ = list(spec.submodule_search_locations)
        pkg.__file__ = spec.origin
        sys.modules["streaming"] = pkg
    import streaming.base

    return streaming.base


def _source(shards: list[str]) -> list[dict]:
    return [{"name": os.path.basename(p), "bytes": os.path.getsize(p)} for p in shards]


def convert(shards: list[str], mds_dir: Path) -> int:
    """The shards' samples in MDS, written by streaming's MDSWriter unless already there; their count."""
    marker = mds_dir / SOURCE
    if marker.exists():
        recorded = json.loads(marker.read_text())
        if recorded["shards"] != _source(shards):
            raise SystemExit(f"{mds_dir} holds a conversion of other shards: give another --mds-dir")
        return recorded["samples"]
    if mds_dir.exists():
        raise SystemExit(f"{mds_dir} exists without {SOURCE} (an interrupted conversion?): remove it")
    sb = _import_streaming()
    tmp = mds_dir.with_name(f"{mds_dir.name}.tmp-{os.getpid()}")
    n = 0
    with sb.MDSWriter(out=str(tmp), columns={"jpg": "bytes", "cls": "int"}, compression=None) as out:
        for path in shards:
            for row in shard_samples(path):
                out.write(row)
                n += 1
    (tmp / SOURCE).write_text(json.dumps({"shards": _source(shards), "samples": n}))
    os.rename(tmp, mds_dir)
    return n


def _one_thread(_: int) -> None:
    torch.set_num_threads(1)


def _decoded_class() -> type:
    sb = _import_streaming()

    class DecodedMDS(sb.StreamingDataset):
        rng = random.Random(0)  # as peers.py's: each worker decodes with its own copy

        def __getitem__(self, index):
            sample = super().__getitem__(index)
            return decode_augment(sample["jpg"], self.rng), sample["cls"]

    return DecodedMDS


def epoch(mds_dir: Path, n: int, workers: int, batch: int) -> tuple[float, float]:
    """Seconds for one epoch, from the construction of dataset and loader to the last batch, and
    the CPU seconds it cost (the workers are joined when the loader's iterator ends)."""
    cls = _decoded_class()
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    ds = cls(local=str(mds_dir), shuffle=False, batch_size=batch)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=batch, num_workers=workers, collate_fn=collate, worker_init_fn=_one_thread
    )
    seen = 0
    for _images, labels in loader:
        seen += len(labels)
    seconds = time.perf_counter() - t0
    del loader, ds  # releases the dataset's shared memory before a next run
    if seen != n:
        raise RuntimeError(f"streaming delivered {seen} samples, expected {n}")
    return seconds, cpu_seconds() - cpu0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", nargs="+", required=True, help="WebDataset tar shards, in order")
    ap.add_argument("--mds-dir", type=Path, required=True, help="MDS cache: converted when missing")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--runs", type=int, default=1, help="epochs, one JSON line each")
    args = ap.parse_args()
    n = convert(args.shards, args.mds_dir)
    for _ in range(args.runs):
        s, cpu = epoch(args.mds_dir, n, args.workers, args.batch)
        result = {
            "samples": n,
            "seconds": round(s, 4),
            "samples_per_s": round(n / s, 2),
            "cpu_s": round(cpu, 4),
        }
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
