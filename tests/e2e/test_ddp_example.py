"""examples/ddp_train.py under torchrun: 2 ranks (gloo on the CPU), 2 epochs, over shards of
deliberately unequal sizes. Before the even split, ranks reading shards in a stride yielded
different numbers of batches and DDP's all-reduce waited for ever on the rank that ran out."""

from __future__ import annotations

import json
from collections import Counter

from tests.helpers.processes import ddp_example
from tests.helpers.shardkit import label_of, make_uneven_shards
from tests.helpers.shm import shm_entries, shm_left_beyond

SIZES = [3, 29, 8, 1, 17, 5, 11]  # 74 samples: 37 per rank, 10 batches of 4 (the last of 1)


def _records(log_dir, rank: int) -> list[dict]:
    return [json.loads(line) for line in (log_dir / f"rank{rank}.jsonl").read_text().splitlines()]


def test_ddp_training_over_uneven_shards_takes_equal_steps_on_every_rank(torchrun, tmp_path):
    urls = make_uneven_shards(tmp_path / "shards", SIZES)
    pattern = str(tmp_path / "shards" / "train-{000000..000006}.tar")
    assert len(urls) == len(SIZES)
    log_dir = tmp_path / "log"
    log_dir.mkdir()
    before = shm_entries()
    proc = ddp_example(torchrun, pattern, log_dir, "--epochs=2", "--batch-size=4", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    total = sum(SIZES)
    steps: dict[tuple[int, int], int] = {}
    for epoch in range(2):
        seen: Counter = Counter()
        for rank in range(2):
            records = [r for r in _records(log_dir, rank) if r["epoch"] == epoch]
            taken = [r for r in records if "keys" in r]
            (summary,) = [r for r in records if "steps" in r]
            assert summary["steps"] == len(taken) == summary["len"]  # len() is the steps taken
            assert summary["all"] == [[len(taken), len(taken)]] * 2  # every rank saw the same
            steps[(epoch, rank)] = len(taken)
            for r in taken:
                assert r["labels"] == [label_of(k) for k in r["keys"]]  # each sample's own label
                seen.update(r["keys"])
        assert set(seen.values()) == {1}, "a sample twice in one epoch"
        assert len(seen) == total - total % 2  # the even split drops at most ranks - 1 samples
    assert len(set(steps.values())) == 1 and steps[(0, 0)] == 10
    assert "epoch 1: 10 steps per rank on 2 rank(s)" in proc.stdout
    assert not shm_left_beyond(before), "the run left shared memory behind"
