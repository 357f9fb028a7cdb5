"""The default shard size: enough shards for every core of the host to have a few readers' worth.

A loader reads a shard per reader from start to end (sequential reads, what object stores and
disks serve best); with fewer shards than readers it splits shards by sample and reads members by
byte range instead (loaders/plan.py). So ``dataset synth`` and ``pack`` size shards to give at
least ``SHARDS_PER_CORE`` shards per usable core of the host they run on (its affinity and CPU
quota), up to the 128 MiB that keeps a shard one sequential read of a useful size.
"""

from __future__ import annotations

from iobench.host.cores import usable_cores

SHARDS_PER_CORE = 4
MAX_SHARD_BYTES = 128 * 2**20


def auto_shard_bytes(total_bytes: float, cores: int | None = None) -> int:
    """The shard size that cuts ``total_bytes`` into at least ``SHARDS_PER_CORE`` shards per usable
    core (``cores``: this host's by default), at most ``MAX_SHARD_BYTES``, at least one byte (a
    shard then holds one sample)."""
    cores = usable_cores() if cores is None else cores
    return max(1, min(MAX_SHARD_BYTES, int(total_bytes // (SHARDS_PER_CORE * max(1, cores)))))


def describe_auto(shard_bytes: int, shards: int) -> str:
    """What the CLI says about a size it chose."""
    from iobench.host.units import format_bytes

    return (
        f"shard size {format_bytes(shard_bytes)} chosen for {shards} shard(s): at least {SHARDS_PER_CORE} per "
        f"usable core ({usable_cores()} here), at most {format_bytes(MAX_SHARD_BYTES)}; --shard-size sets it"
    )
