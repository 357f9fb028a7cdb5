"""Sweep configuration: YAML -> validated plain objects; every error names the key and value.

The embedded default (no servers, a small synthetic dataset in the user's cache directory, the
local tier, workers 0/1/2, an emulated H100 on ResNet-50) lives in configs/default.yaml.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from .tiers import check_tier_spec
from .units import parse_size

CACHE_STATES = ("cold", "warm", "as-is")
ERROR_POLICIES = ("skip", "fail")
DEMANDS = ("training", "mlperf_storage")
CUSTOM_ACCELERATOR = "custom"


class ConfigError(ValueError):
    """A configuration value is wrong: names the key, the value, and what is allowed."""


def _where(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _check_keys(mapping: Any, allowed: dict[str, Any], path: str) -> dict:
    if not isinstance(mapping, dict):
        raise ConfigError(f"{path or 'config'}: expected a mapping, got {type(mapping).__name__} {mapping!r}")
    unknown = sorted(set(mapping) - set(allowed))
    if unknown:
        raise ConfigError(
            f"{_where(path, unknown[0])}: unknown key; allowed keys here are {', '.join(sorted(allowed))}"
        )
    return {k: mapping.get(k, default) for k, default in allowed.items()}


def _choice(value: Any, allowed: tuple[str, ...], where: str) -> str:
    if value not in allowed:
        raise ConfigError(f"{where}={value!r}: allowed values are {', '.join(allowed)}")
    return value


def _int(value: Any, where: str, minimum: int = 0, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where}={value!r}: expected an integer >= {minimum}")
    return value


def _int_list(value: Any, where: str, minimum: int) -> list[int]:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ConfigError(f"{where}=[]: give at least one value")
    return [_int(v, f"{where}[{i}]", minimum) for i, v in enumerate(values)]  # type: ignore[misc]


def _size(value: Any, where: str) -> int:
    try:
        return parse_size(value) if isinstance(value, str) else int(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}={value!r}: {exc}; write a size like 400MB or 2GiB") from None


@dataclass(frozen=True)
class DatasetSpec:
    path: Path
    synth: dict | None  # {"size_bytes"|"samples", "seed", "shard_bytes"} when generated


LAYOUTS = ("shards", "objects")
FORMATS = ("wds", "parquet")
# the backends of loaders.contract.make_loader; spelled out here so validating a sweep file does
# not import torch
LOADER_KINDS = ("torch", "nodes", "dali")


@dataclass(frozen=True)
class LoaderSpec:
    kind: str
    workers: list[int]
    batch_size: list[int]
    prefetch: int
    shuffle_buffer: int
    layout: str = "shards"  # or "objects": one object per sample (iobench dataset objects)


@dataclass(frozen=True)
class AcceleratorSpec:
    kind: str  # "emulated" | "torch"
    type: str | None
    model: str
    demand: str
    count: int
    samples_per_s: float | None = None  # type "custom": a demand given in the sweep file


@dataclass(frozen=True)
class RunSpec:
    cache: list[str]
    warmup_steps: int | str  # a count, or "auto": detected from the step series (MSER-5)
    max_steps: int | None
    epochs: int
    on_error: str
    seed: int
    timeout_s: int
    repeats: int = 1
    diagnose: bool = False  # differential ceilings and, for emulated accelerators, the capacity answer


@dataclass(frozen=True)
class Cell:
    """One measurement: a tier, a loader setting, an accelerator and a cache state."""

    cell_id: str
    tier: dict
    loader: dict
    accelerator: dict
    cache: str
    run: dict
    dataset: str

    def as_dict(self) -> dict:
        return {
            "cell_id": self.cell_id,
            "tier": self.tier,
            "loader": self.loader,
            "accelerator": self.accelerator,
            "cache": self.cache,
            "run": self.run,
            "dataset": self.dataset,
        }


@dataclass(frozen=True)
class SweepConfig:
    dataset: DatasetSpec
    tiers: list[dict]
    loaders: list[LoaderSpec]
    accelerators: list[AcceleratorSpec]
    run: RunSpec
    source: str = field(default="")
    raw: dict = field(default_factory=dict)

    def layouts(self) -> set[str]:
        return {loader.layout for loader in self.loaders}

    def cells(self) -> list[Cell]:
        cells = []
        for tier, loader, acc, cache in itertools.product(
            self.tiers, self.loaders, self.accelerators, self.run.cache
        ):
            for workers, batch in itertools.product(loader.workers, loader.batch_size):
                rate = f"{acc.samples_per_s:g}" if acc.samples_per_s else ""
                acc_label = (
                    f"{acc.type}{rate}x{acc.count}" if acc.kind == "emulated" else f"torch-{acc.model}"
                )
                layout = "" if loader.layout == "shards" else f"-{loader.layout}"
                cell_id = _slug(
                    f"{tier['name']}{layout}-{loader.kind}-w{workers}-b{batch}-{acc_label}-{cache}"
                )
                cells.append(
                    Cell(
                        cell_id=cell_id,
                        tier=tier,
                        loader={
                            "kind": loader.kind,
                            "workers": workers,
                            "batch_size": batch,
                            "prefetch": loader.prefetch,
                            "shuffle_buffer": loader.shuffle_buffer,
                            "layout": loader.layout,
                        },
                        accelerator=acc.__dict__.copy(),
                        cache=cache,
                        run=self.run.__dict__.copy(),
                        dataset=str(self.dataset.path),
                    )
                )
        ids = [c.cell_id for c in cells]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ConfigError(f"tiers: two cells share the id {dupes[0]!r}; give each tier a distinct name")
        return cells


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def default_cache_dir() -> Path:
    base = os.environ.get("IOBENCH_CACHE") or os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / ("" if os.environ.get("IOBENCH_CACHE") else "iobench")


def _dataset(raw: Any) -> DatasetSpec:
    d = _check_keys(raw, {"path": None, "synth": None}, "dataset")
    synth = None
    if d["synth"] is not None:
        s = _check_keys(
            d["synth"],
            {"size": None, "samples": None, "seed": 0, "shard_size": "128MB", "format": "wds"},
            "dataset.synth",
        )
        if (s["size"] is None) == (s["samples"] is None):
            raise ConfigError("dataset.synth: give exactly one of size (e.g. 400MB) or samples (e.g. 4000)")
        synth = {
            "seed": _int(s["seed"], "dataset.synth.seed"),
            **(
                {"format": "parquet"}
                if _choice(s["format"], FORMATS, "dataset.synth.format") == "parquet"
                else {}
            ),
            "shard_bytes": _size(s["shard_size"], "dataset.synth.shard_size"),
        }
        if s["size"] is not None:
            synth["size_bytes"] = _size(s["size"], "dataset.synth.size")
        else:
            synth["samples"] = _int(s["samples"], "dataset.synth.samples", 1)
    if d["path"] is None:
        if synth is None:
            raise ConfigError("dataset: give path (a dataset directory) or synth (generate one)")
        key = "-".join(f"{k}{v}" for k, v in sorted(synth.items()))
        path = default_cache_dir() / "datasets" / _slug(f"synth-{key}")
    else:
        path = Path(os.path.expanduser(str(d["path"]))).absolute()
    return DatasetSpec(path=path, synth=synth)


def _tiers(raw: Any, dataset: DatasetSpec) -> list[dict]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"tiers={raw!r}: expected a non-empty list of tier mappings")
    tiers = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict) or "kind" not in t:
            raise ConfigError(f"tiers[{i}]={t!r}: each tier needs kind (e.g. kind: local)")
        tier = dict(t)
        tier.setdefault("name", tier["kind"])
        if tier["kind"] == "local":
            tier.setdefault("path", str(dataset.path))
        try:
            check_tier_spec(tier)
        except (ValueError, ImportError) as exc:
            raise ConfigError(f"tiers[{i}]: {exc}") from None
        tiers.append(tier)
    return tiers


def _loaders(raw: Any) -> list[LoaderSpec]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"loaders={raw!r}: expected a non-empty list of loader mappings")
    out = []
    for i, item in enumerate(raw):
        where = f"loaders[{i}]"
        d = _check_keys(
            item,
            {
                "kind": "torch",
                "workers": [2],
                "batch_size": [64],
                "prefetch": 2,
                "shuffle_buffer": 1000,
                "layout": "shards",
            },
            where,
        )
        out.append(
            LoaderSpec(
                kind=_choice(d["kind"], LOADER_KINDS, f"{where}.kind"),
                workers=_int_list(d["workers"], f"{where}.workers", 0),
                batch_size=_int_list(d["batch_size"], f"{where}.batch_size", 1),
                prefetch=_int(d["prefetch"], f"{where}.prefetch", 1),  # type: ignore[arg-type]
                shuffle_buffer=_int(d["shuffle_buffer"], f"{where}.shuffle_buffer", 0),  # type: ignore[arg-type]
                layout=_choice(d["layout"], LAYOUTS, f"{where}.layout"),
            )
        )
    return out


def _accelerators(raw: Any) -> list[AcceleratorSpec]:
    from .demand import load_accelerator_table

    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"accelerators={raw!r}: expected a non-empty list of accelerator mappings")
    table = load_accelerator_table()
    out = []
    for i, item in enumerate(raw):
        where = f"accelerators[{i}]"
        d = _check_keys(
            item,
            {
                "kind": "emulated",
                "type": None,
                "model": "resnet50",
                "demand": "training",
                "count": 1,
                "samples_per_s": None,
            },
            where,
        )
        kind = _choice(d["kind"], ("emulated", "torch"), f"{where}.kind")
        rate = d["samples_per_s"]
        if kind == "emulated" and (d["type"] == CUSTOM_ACCELERATOR or rate is not None):
            if d["type"] != CUSTOM_ACCELERATOR or isinstance(rate, bool) or not isinstance(rate, int | float):
                raise ConfigError(
                    f"{where}: a demand of your own needs type: {CUSTOM_ACCELERATOR} and samples_per_s: "
                    f"a number (got type={d['type']!r}, samples_per_s={rate!r})"
                )
            if rate <= 0:
                raise ConfigError(f"{where}.samples_per_s={rate!r}: expected a number > 0")
            acc_type = CUSTOM_ACCELERATOR
        elif kind == "emulated":
            acc_type = _choice(d["type"], (*sorted(table), CUSTOM_ACCELERATOR), f"{where}.type")
            _choice(d["model"], tuple(sorted(table[acc_type]["models"])), f"{where}.model")
        else:
            acc_type = None
            _choice(d["model"], ("small_cnn", "resnet50"), f"{where}.model")
        out.append(
            AcceleratorSpec(
                kind=kind,
                type=acc_type,
                model=d["model"],
                demand=_choice(d["demand"], DEMANDS, f"{where}.demand"),
                count=_int(d["count"], f"{where}.count", 1),  # type: ignore[arg-type]
                samples_per_s=float(rate) if rate is not None else None,
            )
        )
    return out


def _run(raw: Any) -> RunSpec:
    d = _check_keys(
        raw or {},
        {
            "cache": ["cold"],
            "warmup_steps": "auto",
            "max_steps": None,
            "epochs": 1,
            "on_error": "skip",
            "seed": 0,
            "timeout_s": 900,
            "repeats": 1,
            "diagnose": False,
        },
        "run",
    )
    warmup = d["warmup_steps"]
    if warmup != "auto" and (isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0):
        raise ConfigError(
            f"run.warmup_steps={warmup!r}: expected auto (detected from the steps) or an integer >= 0"
        )
    if not isinstance(d["diagnose"], bool):
        raise ConfigError(f"run.diagnose={d['diagnose']!r}: expected true or false")
    caches = d["cache"] if isinstance(d["cache"], list) else [d["cache"]]
    return RunSpec(
        cache=[_choice(c, CACHE_STATES, f"run.cache[{i}]") for i, c in enumerate(caches)],
        warmup_steps=warmup,  # type: ignore[arg-type]
        max_steps=_int(d["max_steps"], "run.max_steps", 1, optional=True),
        epochs=_int(d["epochs"], "run.epochs", 1),  # type: ignore[arg-type]
        on_error=_choice(d["on_error"], ERROR_POLICIES, "run.on_error"),
        seed=_int(d["seed"], "run.seed"),  # type: ignore[arg-type]
        timeout_s=_int(d["timeout_s"], "run.timeout_s", 1),  # type: ignore[arg-type]
        repeats=_int(d["repeats"], "run.repeats", 1),  # type: ignore[arg-type]
        diagnose=d["diagnose"],
    )


def parse_config(raw: Any, source: str = "<config>") -> SweepConfig:
    top = _check_keys(
        raw, {"dataset": None, "tiers": None, "loaders": None, "accelerators": None, "run": None}, ""
    )
    for key in ("dataset", "tiers", "loaders", "accelerators"):
        if top[key] is None:
            raise ConfigError(f"{key}: missing; see configs/default.yaml for an example")
    dataset = _dataset(top["dataset"])
    return SweepConfig(
        dataset=dataset,
        tiers=_tiers(top["tiers"], dataset),
        loaders=_loaders(top["loaders"]),
        accelerators=_accelerators(top["accelerators"]),
        run=_run(top["run"]),
        source=source,
        raw=raw,
    )


def load_config(path: str | Path | None = None) -> SweepConfig:
    """Read a sweep YAML; ``None`` gives the embedded default."""
    if path is None:
        text, source = resources.files("iobench").joinpath("configs/default.yaml").read_text(), "default"
    else:
        try:
            text, source = Path(path).read_text(), str(path)
        except OSError as exc:
            raise ConfigError(f"cannot read config {path}: {exc.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    return parse_config(raw, source)
