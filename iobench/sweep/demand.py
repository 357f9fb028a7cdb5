"""Per-accelerator input demand (configs/accelerators.yaml): light enough for config validation."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import yaml

from iobench.sweep.config import DEMANDS, ConfigError


def load_accelerator_table() -> dict:
    text = resources.files("iobench").joinpath("configs/accelerators.yaml").read_text()
    return yaml.safe_load(text)["accelerators"]


@dataclass(frozen=True)
class Demand:
    accelerator: str
    model: str
    kind: str
    samples_per_s: float
    source: str


def lookup_demand(accelerator: str, model: str = "resnet50", kind: str = "training") -> Demand:
    table = load_accelerator_table()
    if accelerator not in table:
        raise ConfigError(f"accelerator.type={accelerator!r}: allowed values are {', '.join(sorted(table))}")
    models = table[accelerator]["models"]
    if model not in models:
        raise ConfigError(
            f"accelerator.model={model!r} for {accelerator}: allowed values are {', '.join(sorted(models))}"
        )
    if kind not in DEMANDS:
        raise ConfigError(f"accelerator.demand={kind!r}: allowed values are {', '.join(DEMANDS)}")
    entry = models[model][kind]
    return Demand(accelerator, model, kind, float(entry["samples_per_s"]), " ".join(entry["source"].split()))
