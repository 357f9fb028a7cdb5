"""An ImageFolder-style tree of JPEGs (``TREE/<class>/<key>.jpg``) for the probe's ground-truth jobs,
made from iobench's synthetic ImageNet-like photos (about 110 KiB each).

    python examples/probe/make_tree.py /tmp/probe-tree --samples 2048

The training scripts beside it never import iobench; this one does, to make their data.
"""

from __future__ import annotations

import argparse
import tarfile
import tempfile
from pathlib import Path

from iobench.datasets.synth import synthesize


def make_tree(out: Path, samples: int, seed: int = 0) -> int:
    """Write the tree and return how many JPEGs it holds (a tree already complete is kept)."""
    done = out / ".complete"
    if done.exists() and done.read_text() == f"{samples} {seed}\n":
        return samples
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="probe-tree-") as shards:
        synthesize(shards, samples=samples, seed=seed, shard_bytes=64 * 2**20)
        for shard in sorted(Path(shards).glob("*.tar")):
            with tarfile.open(shard) as tar:
                members = {m.name: m for m in tar.getmembers()}
                for name, member in members.items():
                    if not name.endswith(".jpg"):
                        continue
                    key = name[: -len(".jpg")]
                    label = tar.extractfile(members[f"{key}.cls"]).read().decode().strip()  # type: ignore[union-attr]
                    folder = out / f"class{int(label):04d}"
                    folder.mkdir(exist_ok=True)
                    (folder / f"{key}.jpg").write_bytes(tar.extractfile(member).read())  # type: ignore[union-attr]
    done.write_text(f"{samples} {seed}\n")
    return samples


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path)
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    print(f"{make_tree(args.out, args.samples, args.seed)} JPEGs in {args.out}")


if __name__ == "__main__":
    main()
