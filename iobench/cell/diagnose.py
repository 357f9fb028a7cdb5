"""The differential run of a cell: measure the three ceilings, then (for an emulated accelerator)
answer "how many accelerators does this tier + loader feed?" and check the answer by running it.
"""

from __future__ import annotations

from iobench.analysis.differential import capacity
from iobench.cell.accelerator import EmulatedAccelerator
from iobench.cell.ceilings import Ceiling, accelerator_ceiling, fetch_ceiling, prep_ceiling
from iobench.cell.measure import measure
from iobench.sweep.estimate import samples_per_run

FETCH_MAX_SECONDS = 20.0


def item_sizes(manifest, items: list, source_options: dict, objects: bool) -> list[tuple[int, int]]:
    """(bytes, samples) per loader item, in the order of ``items``."""
    if objects:
        sizes = source_options.get("shard_sizes") or {}
        return [(int(sizes.get(url, manifest.mean_sample_bytes)), 1) for _, url, _ in items]
    return [(s.bytes, s.samples) for s in manifest.shards]


def measure_ceilings(
    tier, manifest, cell: dict, items: list, source_options: dict, consumer
) -> dict[str, Ceiling]:
    run, loader = cell["run"], cell["loader"]
    objects = loader.get("layout", "shards") == "objects"
    planned = samples_per_run(manifest.num_samples, loader, run)
    out = {"accelerator": accelerator_ceiling(consumer, loader["batch_size"])}
    tier.prepare(manifest, cell["cache"])  # the fetch ceiling reads in the cell's cache state
    out["fetch"] = fetch_ceiling(
        items,
        source_options,
        loader,
        run,
        samples=min(planned, manifest.num_samples),
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
    cell: dict,
    items: list,
    source_options: dict,
    consumer: EmulatedAccelerator,
    cores: int,
    input_ceiling: float,
) -> dict:
    """The predicted largest count at >= 90 % AU, then measured runs at that count and one more."""
    answer = capacity(input_ceiling, consumer.demand.samples_per_s)
    n = int(answer["max_accelerators"])
    checks = []
    for count in [n, n + 1] if n >= 1 else [1]:
        m = measure(
            tier, manifest, cell, items, source_options, EmulatedAccelerator(consumer.demand, count), cores
        )
        checks.append({"count": count, "au": m.metrics.au, "samples_per_s": m.metrics.samples_per_s})
    ok = all((c["au"] >= 0.9) == (c["count"] <= n) for c in checks)
    answer.update(
        accelerator=consumer.demand.accelerator,
        model=consumer.demand.model,
        demand=consumer.demand.kind,
        checks=checks,
        confirmed=ok,
    )
    return answer
