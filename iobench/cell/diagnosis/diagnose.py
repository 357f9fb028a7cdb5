"""The differential run of a cell: measure the three ceilings, then (for an emulated accelerator)
answer "how many accelerators does this tier + loader feed?" and check the answer by running it.
"""

from __future__ import annotations

from dataclasses import replace

from iobench.accelerators.consumers import EmulatedAccelerator, emulated_host_cost
from iobench.analysis.differential import capacity
from iobench.analysis.verdict import AU_TARGET
from iobench.cell.diagnosis.ceilings import accelerator_ceiling, fetch_ceiling, prep_ceiling
from iobench.cell.inputs import CellInputs
from iobench.cell.live import live_file
from iobench.cell.measure import measure
from iobench.results.figures import Capacity, CapacityCheck, Ceilings

FETCH_MAX_SECONDS = 20.0


def item_sizes(inputs: CellInputs) -> list[tuple[int, int]]:
    """(bytes, samples) per loader item, in the order of the items."""
    if inputs.cell.loader.layout == "objects":
        sizes, mean = inputs.source.shard_sizes, inputs.manifest.mean_sample_bytes
        return [(int(sizes.get(url, mean)), 1) for _, url, _ in inputs.items]
    return [(s.bytes, s.samples) for s in inputs.manifest.shards]


def measure_ceilings(inputs: CellInputs) -> Ceilings:
    cell, manifest = inputs.cell, inputs.manifest
    run, loader = cell.run, cell.loader
    planned = cell.samples_per_repeat(manifest.num_samples)
    accelerator = accelerator_ceiling(inputs.consumer, loader.batch_size)
    inputs.tier.prepare(manifest, cell.cache)  # the fetch ceiling reads in the cell's cache state
    fetch = fetch_ceiling(
        inputs.items,
        inputs.source,
        loader,
        run,
        samples=manifest.num_samples if planned is None else min(planned, manifest.num_samples),
        max_seconds=FETCH_MAX_SECONDS,
    )
    # copying into RAM is not a measurement: it needs no bandwidth cap
    prep = prep_ceiling(
        inputs.items, replace(inputs.source, throttle=None), loader, run, sizes=item_sizes(inputs)
    )
    return Ceilings(accelerator=accelerator, prep=prep, fetch=fetch)


def check_capacity(inputs: CellInputs, input_ceiling: float, takes: float | None) -> Capacity:
    """The predicted largest count at >= 90 % AU, then measured runs of the cell's own trainer (its
    host work and compute distribution, for that many accelerators) at that count and one more.
    ``takes``: the samples/s one accelerator's trainer steps at alone."""
    consumer = inputs.consumer
    assert isinstance(consumer, EmulatedAccelerator)
    answer = capacity(input_ceiling, consumer.demand.samples_per_s, takes=takes)
    n = answer.max_accelerators
    checks = []
    live = live_file()
    acc, batch = inputs.cell.accelerator, inputs.cell.loader.batch_size
    for count in [n, n + 1] if n >= 1 else [1]:
        if live:  # the tier is prepared again before each check's step loop
            live.pause(f"preparing the tier for the capacity check at {count} accelerators")
        checking = consumer.for_count(count, emulated_host_cost(replace(acc, count=count), batch))
        m = measure(replace(inputs, consumer=checking))
        checks.append(CapacityCheck(count=count, au=m.metrics.au, samples_per_s=m.metrics.samples_per_s))
    return replace(
        answer,
        accelerator=consumer.demand.accelerator,
        model=consumer.demand.model,
        demand=consumer.demand.kind,
        checks=tuple(checks),
        confirmed=all((c.au >= AU_TARGET) == (c.count <= n) for c in checks),
    )
