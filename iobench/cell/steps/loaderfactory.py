"""Loader backends by name: each turns (shard URLs, settings) into an epoch -> batches callable.

The sweep's ``loaders[i].kind`` is a name in the loaders' registry ("torch", "threads", "nodes",
"dali", or one a plugin registered), so the runner builds every backend the same way training code
does, with the same declared options. Every backend yields :class:`loaders.Batch` objects with the same stage
statistics, so the step loop and the metrics are backend-neutral.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from iobench.results.spec import LoaderSettings, RunSettings
from loaders import LoaderConfig, make_loader
from loaders.storage import SourceSpec

if TYPE_CHECKING:  # a Batch holds tensors: the sweep's checks build configs here without torch
    from loaders import Batch, Loader


class LoaderEpochs:
    """The cell's loader, built once: called with an epoch, that epoch's batches. ``close`` stops
    its workers now: persistent workers read ahead into the next epoch after the loop's last step,
    and a trainer timed alone beside them is timed on a shared host (a 1 ms emulated step took
    1.7 ms beside one worker finishing its read-ahead, 1.1 ms after)."""

    def __init__(self, loader: Loader) -> None:
        self.loader = loader

    def __call__(self, epoch: int) -> Iterable[Batch]:
        self.loader.set_epoch(epoch)
        return self.loader

    def close(self) -> None:
        close = getattr(self.loader, "close", None)  # the built-in backends have one; a plugin may not
        if close is not None:
            close()


def loader_config(
    items: list,
    source: SourceSpec,
    loader: LoaderSettings,
    run: RunSettings,
    *,
    rank: int = 0,
    world_size: int = 1,
) -> LoaderConfig:
    """The contract's config from a cell: the tier's description of its source (sizes and sample
    counts per shard included), the loader setting, the run settings, and which rank of how many
    reads (each rank gets a disjoint, equal share of the epoch: loaders.plan)."""
    objects = loader.layout == "objects"
    return LoaderConfig(
        urls=None if objects else items,
        objects=items if objects else None,
        source=source,
        pipeline=loader.pipeline(run),
        workers=loader.workers,
        prefetch=loader.prefetch,
        rank=rank,
        world_size=world_size,
        options=dict(loader.options),
    )


def epoch_factory(kind: str, config: LoaderConfig) -> LoaderEpochs:
    """The cell's loader of ``kind``, built once from its :func:`loader_config`."""
    return LoaderEpochs(make_loader(kind, config))


def decoder_of(loader: LoaderSettings) -> str | None:
    """The JPEG decoder a cell's readers use, by name; None where they decode nothing, or where
    DALI decodes inside its own graph."""
    from loaders.pipeline import decoder_name  # the decoders import torch: the sweep's checks do not

    if not loader.decode or loader.kind == "dali":
        return None
    return decoder_name(loader.decode_roi)


def decoder_notes(loader: LoaderSettings) -> tuple[str, ...]:
    """What the report says of a cell's decoder: which one, and why not the crop region's where
    it was asked for and is missing (the same note on every cell: said once for a run)."""
    from loaders.pipeline import REGION_DECODER_MISSING, region_decode_available

    decoder = decoder_of(loader)
    if decoder is None:
        return ()
    note = f"JPEG decode: {decoder}"
    if loader.decode_roi and not region_decode_available():
        return (f"{note}; {REGION_DECODER_MISSING}",)
    return (note + ("" if loader.decode_roi else " (decode_roi: false)"),)
