"""Whole shards vs ranged parts: wall and CPU per sample of the loaders' fetch stage (the shard cursor,
no decode) over one epoch of one rank's 8 readers, run one after another in this process.

    python benchmarks/bench_split.py [ROUNDS]

whole: 512 synthetic samples in 17 shards (whole shards, read front to back); split: the same
samples in 2 shards, so each of the 8 readers reads its part by byte range from the shards' .idx.
Warm (page cache filled) and cold (evicted) epochs, interleaved; medians of ROUNDS (default 5).
The datasets are made once under /tmp/iobench-bench-split.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from iobench.datasets.synth import synthesize
from iobench.host import pagecache
from loaders import LoaderConfig
from loaders.config import plan_for
from loaders.pipeline import ShardSamples
from loaders.storage.sources import ShardSource


def epoch(urls: list[str], cold: bool) -> tuple[str, int, int, float, float]:
    cfg = LoaderConfig(urls=urls, workers=8, batch_size=16, rank=0, world_size=1)
    plan = plan_for(cfg, cfg.items(), cfg.split_counts(8), 0, 8)
    if cold:
        pagecache.evict(urls)
    else:
        pagecache.warm(urls)
    source = ShardSource(cfg.source)
    n = nbytes = 0
    w0, c0 = time.perf_counter(), time.process_time()
    for reader in plan.readers:
        for s in ShardSamples(reader.items, source, cfg.pipeline.max_member_bytes, cfg.pipeline.on_error):
            n += 1
            nbytes += s.read_bytes
    return plan.split, n, nbytes, time.perf_counter() - w0, time.process_time() - c0


if __name__ == "__main__":
    root = Path("/tmp/iobench-bench-split")
    sets = {}
    for name, shard_bytes in (("whole", 3_700_000), ("split", 30_000_000)):
        out = root / name
        if not (out / "manifest.json").exists():
            synthesize(out, samples=512, seed=7, shard_bytes=shard_bytes)
        sets[name] = sorted(str(p) for p in out.glob("*.tar"))
    print({k: len(v) for k, v in sets.items()})

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    res: dict[tuple[str, bool], list[tuple[float, float, int]]] = {
        (k, c): [] for k in sets for c in (False, True)
    }
    for r in range(rounds):
        for cold in (False, True):
            for k in ("whole", "split") if r % 2 == 0 else ("split", "whole"):
                split, n, nb, wall, cpu = epoch(sets[k], cold)
                assert n == 512
                res[(k, cold)].append((wall / n * 1e6, cpu / n * 1e6, nb))
    for (k, cold), v in res.items():
        print(
            f"{k:5s} {'cold' if cold else 'warm'}: wall {statistics.median(x[0] for x in v):7.1f} us/sample, "
            f"cpu {statistics.median(x[1] for x in v):6.1f} us/sample, bytes read {v[0][2]:,} "
            f"(walls {[round(x[0], 1) for x in v]}, cpus {[round(x[1], 1) for x in v]})"
        )
