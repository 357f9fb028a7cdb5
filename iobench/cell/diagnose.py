"""The differential run of a cell: measure the three ceilings, then (for an emulated accelerator)
answer "how many accelerators does this tier + loader feed?" and check the answer by running it.
"""

from __future__ import annotations

from dataclasses import replace

from iobench.analysis.differential import capacity
from iobench.cell.accelerator import EmulatedAccelerator
from iobench.cell.ceilings import accelerator_ceiling, fetch_ceiling, prep_ceiling
from iobench.cell.live import live_file
from iobench.cell.measure import measure
from iobench.results.figures import Capacity, CapacityCheck, Ceiling
from iobench.results.spec import CellSpec

FETCH_MAX_SECONDS = 20.0


def item_sizes(manifest, items: list, source_options: dict, objects: bool) -> list[tuple[int, int]]:
    """(bytes, samples) per loader item, in the order of ``items``."""
    if objects:
        sizes = source_options.get("shard_sizes") or {}
        return [(int(sizes.get(url, manifest.mean_sample_bytes)), 1) for _, url, _ in items]
    return [(s.bytes, s.samples) for s in manifest.shards]


def measure_ceilings(
    tier, manifest, cell: CellSpec, items: list, source_options: dict, consumer
) -> dict[str, Ceiling]:
    run, loader = cell.run, cell.loader
    objects = loader.layout == "objects"
    planned = cell.samples_per_repeat(manifest.num_samples)
    out = {"accelerator": accelerator_ceiling(consumer, loader.batch_size)}
    tier.prepare(manifest, cell.cache)  # the fetch ceiling reads in the cell's cache state
    out["fetch"] = fetch_ceiling(
        items,
        source_options,
        loader,
        run,
        samples=min(planned, manifest.num_samples),  # type: ignore[type-var]
        max_seconds=FETCH_MAX_SECONDS,
    )
    # copying into RAM is not a measurement: it needs no bandwidth cap
    copy_options = {k: v for k, v in source_options.items() if k != "throttle"}
    out["prep"] = prep_ceiling(
        items, copy_options, loader, run, sizes=item_sizes(manifest, items, source_options, objects)
    )
    return out


def check_capacity(
    tier,
    manifest,
    cell: CellSpec,
    items: list,
    source_options: dict,
    consumer: EmulatedAccelerator,
    cores: int,
    input_ceiling: float,
) -> Capacity:
    """The predicted largest count at >= 90 % AU, then measured runs at that count and one more."""
    answer = capacity(input_ceiling, consumer.demand.samples_per_s)
    n = answer.max_accelerators
    checks = []
    live = live_file()
    for count in [n, n + 1] if n >= 1 else [1]:
        if live:  # the tier is prepared again before each check's step loop
            live.pause(f"preparing the tier for the capacity check at {count} accelerators")
        m = measure(
            tier, manifest, cell, items, source_options, EmulatedAccelerator(consumer.demand, count), cores
        )
        checks.append(CapacityCheck(count=count, au=m.metrics.au, samples_per_s=m.metrics.samples_per_s))
    return replace(
        answer,
        accelerator=consumer.demand.accelerator,
        model=consumer.demand.model,
        demand=consumer.demand.kind,
        checks=tuple(checks),
        confirmed=all((c.au >= 0.9) == (c.count <= n) for c in checks),
    )
