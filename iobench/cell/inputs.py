"""What every measured run of a cell starts from: the cell, its tier and dataset, what the loader
reads from the tier, what consumes the batches and the cores it may use. Read once per cell
process (or rank) and handed whole to each repeat, ceiling and capacity check.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from iobench.accelerators.consumers import Consumer
from iobench.analysis.evidence import ClientFacts, client_facts
from iobench.datasets.manifest import Manifest
from iobench.results.spec import CellSpec, LoaderSettings
from iobench.tiers import make_tier
from iobench.tiers.base import Tier
from loaders.storage import SourceSpec


@dataclass(frozen=True)
class CellInputs:
    cell: CellSpec
    tier: Tier
    manifest: Manifest
    # shard URLs, or (key, url, label) per sample for the objects layout
    items: list[Any]
    source: SourceSpec  # how the loader reads them (the tier's description, completed here)
    consumer: Consumer
    cores: int  # the loader's share of this host's cores: the verdict weighs workers against them
    client: ClientFacts | None = None  # the object client the tier reads through, for the verdict


def cell_inputs(cell: CellSpec, consumer: Consumer, cores: int) -> CellInputs:
    """The cell's tier made, its dataset's manifest read and the loader's items listed."""
    tier = make_tier(cell.tier)
    manifest = tier.load_manifest()
    items, source = loader_inputs(tier, manifest, cell.loader)
    return CellInputs(
        cell, tier, manifest, items, source, consumer, cores, client_facts(tier.object_client())
    )


def loader_inputs(tier: Tier, manifest: Manifest, loader: LoaderSettings) -> tuple[list[Any], SourceSpec]:
    """What the loader reads: shard URLs, or (key, url, label) per sample for the objects layout.
    With shards, the manifest's sample count of each: the loaders split an epoch evenly over ranks
    by them (and know their len() without reading a shard)."""
    source = tier.source(manifest)
    if loader.layout == "shards":
        urls = tier.shard_urls(manifest)
        samples = {url: s.samples for url, s in zip(urls, manifest.shards, strict=True)}
        return urls, replace(source, shard_samples=samples)
    from iobench.datasets.objects import INDEX_NAME, OBJECTS_DIR, load_object_index

    index = load_object_index(tier.read_json(INDEX_NAME), tier.object_url(INDEX_NAME))
    items = [(s["key"], tier.object_url(f"{OBJECTS_DIR}/{s['name']}"), s["label"]) for s in index]
    # sizes from the index save a HEAD per object; per-sample objects bypass the shard cache
    sizes = {url: s["bytes"] for (_, url, _), s in zip(items, index, strict=True)}
    return items, replace(source, shard_sizes=sizes, cache=None)
