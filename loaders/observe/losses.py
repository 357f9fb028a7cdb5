"""What a reader lost: the bytes of a shard it skipped after finding them damaged, and the samples
that were in them, so that an epoch short of samples says where they went."""

from __future__ import annotations

from dataclasses import dataclass

# a batch (and a loader's stats) keeps at most this many records; the counters count them all
KEEP_LOSSES = 20


@dataclass(frozen=True)
class Loss:
    """Bytes ``[begin, end)`` of shard ``url`` skipped as damaged: ``samples`` whose members lay
    there (None: not known, the shard having no index to place them), the first of them
    ``first`` (its number in the shard, where known), and what was wrong (``problem``)."""

    url: str
    begin: int
    end: int
    samples: int | None
    first: int | None
    problem: str

    def describe(self) -> str:
        """One line: the samples, the shard, the bytes and the problem."""
        if self.samples is None:
            what = "samples not known (no index)"
        elif self.first is not None and self.samples > 1:
            what = f"{self.samples:,} samples ({self.first:,}-{self.first + self.samples - 1:,})"
        elif self.first is not None and self.samples == 1:
            what = f"1 sample (number {self.first:,})"
        else:
            what = f"{self.samples:,} samples"
        return f"{what} in {self.url} bytes {self.begin:,}-{self.end:,}: {self.problem}"
