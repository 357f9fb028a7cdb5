"""The sweep file's ``checkpoints:`` section: checkpoint cells, one per destination x mode x interval
x rank count x accelerator, each training on the sweep's first loader setting while it saves its
state every K steps (docs/checkpoints.md).

    checkpoints:
      state: {model: llama3-8b}          # or {size: 1GiB}; scaled to what this host can hold, said so
      to:
        - {tier: local, path: /data/ckpt, io: [buffered, direct]}
        - {tier: cephfs, path: /mnt/cephfs/ckpt}
        - {tier: s3, url: s3://bucket/ckpt, writer: [s3torchconnector, fsspec]}
        - {tier: rados, url: rados://pool/ckpt}
      mode: [sync, async, async_pinned]
      every_steps: [20, 50]
      ranks: [1]
      saves: 3                           # saves each cell makes; its steps follow
      restore: true                      # the last checkpoint restored cold, then warm

Each destination names a tier of ``tiers:``: the cell reads its dataset from that tier and writes its
checkpoints to the location given there, on the tier's connection (endpoint, credentials, cluster).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any, get_args

from iobench.checkpoint.sizes import MODELS, StateSize, state_size
from iobench.host.memory import usable_memory
from iobench.results.checkpoint import CheckpointDestination, CheckpointSettings
from iobench.results.choices import CheckpointIo, CheckpointMode, CheckpointWriter
from iobench.results.spec import CellSpec
from iobench.sweep.checks import ConfigError, as_list, check_keys, choice, int_list, integer, size, slug

# what writes a checkpoint to each tier kind, the first being the default
WRITERS: dict[str, tuple[CheckpointWriter, ...]] = {
    "local": ("iobench", "stock"),
    "cephfs": ("iobench", "stock"),
    "s3": ("fsspec", "iobench", "s3torchconnector"),
    "rados": ("iobench",),
}
LOCATION_KEY = {"local": "path", "cephfs": "path", "s3": "url", "rados": "url"}
WARMUP_STEPS = 3  # a checkpoint cell's fixed warm-up: its step series has a spike per save


@dataclass(frozen=True)
class CheckpointSection:
    state: StateSize
    model: str | None
    destinations: list[CheckpointDestination]
    modes: list[CheckpointMode]
    every_steps: list[int]
    ranks: list[int]
    saves: int = 3
    restore: bool = True
    keep: int = 2
    notes: list[str] = field(default_factory=list)


def parse_checkpoints(raw: Any, tiers: list[dict]) -> CheckpointSection | None:
    if raw is None:
        return None
    d = check_keys(
        raw,
        {
            "state": None,
            "to": None,
            "mode": ["sync"],
            "every_steps": [50],
            "ranks": [1],
            "saves": 3,
            "restore": True,
            "keep": 2,
        },
        "checkpoints",
    )
    modes: list[CheckpointMode] = [
        choice(m, get_args(CheckpointMode), f"checkpoints.mode[{i}]")
        for i, m in enumerate(as_list(d["mode"], "checkpoints.mode"))
    ]
    if not isinstance(d["restore"], bool):
        raise ConfigError(f"checkpoints.restore={d['restore']!r}: expected true or false")
    model, nbytes = _state(d["state"])
    copies = 2 if any(m != "sync" for m in modes) else 1
    return CheckpointSection(
        state=state_size(model, nbytes, usable_memory().total, copies),
        model=model,
        destinations=_destinations(d["to"], tiers),
        modes=modes,
        every_steps=int_list(d["every_steps"], "checkpoints.every_steps", 1),
        ranks=int_list(d["ranks"], "checkpoints.ranks", 1),
        saves=integer(d["saves"], "checkpoints.saves", 1) or 1,
        restore=d["restore"],
        keep=integer(d["keep"], "checkpoints.keep", 1) or 1,
    )


def _state(raw: Any) -> tuple[str | None, int | None]:
    d = check_keys(
        raw if raw is not None else {"size": "256MiB"}, {"model": None, "size": None}, "checkpoints.state"
    )
    if (d["model"] is None) == (d["size"] is None):
        raise ConfigError(
            f"checkpoints.state={raw!r}: give a model ({', '.join(MODELS)}) or a size (e.g. size: 1GiB), one of them"
        )
    if d["model"] is not None:
        return choice(d["model"], tuple(MODELS), "checkpoints.state.model"), None
    return None, size(d["size"], "checkpoints.state.size")


def _destinations(raw: Any, tiers: list[dict]) -> list[CheckpointDestination]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(
            f"checkpoints.to={raw!r}: expected a list of destinations, e.g. [{{tier: local, path: /data/ckpt}}]"
        )
    by_name = {t["name"]: t for t in tiers}
    out = []
    for i, entry in enumerate(raw):
        at = f"checkpoints.to[{i}]"
        d = check_keys(
            entry, {"tier": None, "path": None, "url": None, "io": None, "writer": None, "name": None}, at
        )
        tier = by_name.get(d["tier"])
        if tier is None:
            raise ConfigError(f"{at}.tier={d['tier']!r}: name a tier of tiers: ({', '.join(by_name)})")
        kind = tier["kind"]
        if kind not in WRITERS:
            raise ConfigError(
                f"{at}: tier {d['tier']!r} is of kind {kind}; checkpoints go to local, cephfs, s3 or rados tiers"
            )
        key = LOCATION_KEY[kind]
        location = d[key]
        if not isinstance(location, str) or not location:
            raise ConfigError(f"{at}.{key}: missing; where on tier {d['tier']!r} the checkpoints go")
        if key == "url" and not location.startswith(f"{kind if kind == 'rados' else 's3'}://"):
            raise ConfigError(
                f"{at}.url={location!r}: expected {'rados://pool/prefix' if kind == 'rados' else 's3://bucket/prefix'}"
            )
        writers = [
            choice(w, WRITERS[kind], f"{at}.writer")
            for w in as_list(d["writer"] or WRITERS[kind][0], f"{at}.writer")
        ]
        ios: list[CheckpointIo] = [
            choice(x, get_args(CheckpointIo), f"{at}.io") for x in as_list(d["io"] or "buffered", f"{at}.io")
        ]
        if kind not in ("local", "cephfs") and d["io"] is not None:
            raise ConfigError(f"{at}.io: only a file tier (local, cephfs) is written buffered or direct")
        for writer, io in itertools.product(writers, ios):
            suffix = "".join(f"-{x}" for x, many in ((writer, len(writers) > 1), (io, len(ios) > 1)) if many)
            out.append(
                CheckpointDestination(slug(f"{d['name'] or d['tier']}{suffix}"), tier, location, writer, io)
            )
    return out


def checkpoint_cells(section: CheckpointSection, config: Any) -> list[CellSpec]:
    """The section's cells, on the sweep's first dataset, loader setting and cache state."""
    from iobench.sweep.datasetspec import bind_tier

    dataset = config.datasets[0]
    entry = config.loaders[0]
    loader = replace(entry.settings, options=dict(entry.settings.options))
    cells = []
    for dest, mode, every, ranks, acc in itertools.product(
        section.destinations, section.modes, section.every_steps, section.ranks, config.accelerators
    ):
        # saves after steps K-1, 2K-1, ...: the last one's background write still has steps beside it
        steps = every * section.saves + max(1, every // 2)
        run = replace(
            config.run.settings,
            ranks_per_node=ranks,
            max_steps=steps,
            epochs=max(config.run.settings.epochs, 50),
            warmup_steps=WARMUP_STEPS,
        )
        settings = CheckpointSettings(
            destination=replace(dest, tier=bind_tier(dest.tier, dataset)),
            mode=mode,
            every_steps=every,
            state_bytes=section.state.bytes,
            state_said=section.state.said,
            model=section.model,
            restore=section.restore,
            keep=section.keep,
        )
        scale = f"-r{ranks}" if ranks > 1 else ""
        cells.append(
            CellSpec(
                cell_id=slug(f"ckpt-{dest.name}-{mode}-every{every}-{acc.label.replace(':', '-')}{scale}"),
                tier=bind_tier(dest.tier, dataset),
                loader=loader,
                accelerator=acc,
                cache=config.run.cache[0],
                run=run,
                dataset=str(dataset.path),
                checkpoint=settings,
            )
        )
    return cells
