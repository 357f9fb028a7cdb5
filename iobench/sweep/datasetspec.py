"""The datasets of a sweep: one, or one per size of a size sweep; where each lives; and the tier
that reads each (a tier template with the dataset's label filled in)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iobench.datasets.samplesize import DEFAULT_SAMPLE_KIB, KIB, check_sample_kib
from iobench.host.cachedir import cache_dir
from iobench.sweep.checks import ConfigError, as_list, check_keys, choice, integer, size_in_bytes, slug

FORMATS = ("wds", "parquet")
# written in a tier's string options, it becomes the dataset's label: one tier template then reads
# each dataset of a size sweep from its own place (s3://bucket/synth-{dataset})
DATASET_PLACEHOLDER = "{dataset}"


@dataclass(frozen=True)
class DatasetSpec:
    path: Path
    # {"size_bytes"|"samples", "seed", "shard_bytes"[, "format"][, "target_kb"]} when generated:
    # synthesize's keyword arguments, target_kb only when sample_size is not the default
    synth: dict | None
    label: str = ""  # short and readable: "600MB", "4000samples", or the directory name

    @property
    def synth_jpeg_bytes(self) -> float | None:
        """The mean JPEG bytes a generated dataset is made at (sample_size); None for a given one."""
        if self.synth is None:
            return None
        return self.synth.get("target_kb", DEFAULT_SAMPLE_KIB) * KIB


def _bind(value: Any, label: str) -> Any:
    if isinstance(value, str):
        return value.replace(DATASET_PLACEHOLDER, label)
    if isinstance(value, dict):
        return {k: _bind(v, label) for k, v in value.items()}
    if isinstance(value, list):
        return [_bind(v, label) for v in value]
    return value


def bind_tier(template: dict, dataset: DatasetSpec) -> dict:
    """The tier that reads ``dataset``: the placeholder filled in, a local tier without a path
    pointed at the dataset directory."""
    tier = _bind(template, dataset.label)
    tier.setdefault("name", tier["kind"])
    if tier["kind"] == "local":
        tier.setdefault("path", str(dataset.path))
    return tier


def _abspath(value: Any, key: str) -> Path:
    if not isinstance(value, str | os.PathLike):
        raise ConfigError(f"{key}={value!r}: expected a directory path")
    return Path(os.path.expanduser(str(value))).absolute()


def _target_kb(value: Any) -> dict[str, float]:
    """synthesize's ``target_kb`` for a ``sample_size``: none for the default, so a dataset made
    before the key existed keeps its directory and its recorded request."""
    key = "dataset.synth.sample_size"
    if value is None:
        return {}
    kib = size_in_bytes(value, key) / KIB
    try:
        check_sample_kib(kib)
    except ValueError as exc:
        raise ConfigError(f"{key}={value!r}: {exc}") from None
    return {} if kib == DEFAULT_SAMPLE_KIB else {"target_kb": kib}


def parse_datasets(raw: Any) -> list[DatasetSpec]:
    d = check_keys(raw, {"path": None, "synth": None}, "dataset")
    if d["synth"] is None:
        if d["path"] is None:
            raise ConfigError("dataset: give path (a dataset directory) or synth (generate one)")
        path = _abspath(d["path"], "dataset.path")
        return [DatasetSpec(path=path, synth=None, label=slug(path.name))]
    s = check_keys(
        d["synth"],
        {
            "size": None,
            "samples": None,
            "seed": 0,
            "shard_size": "128MB",
            "format": "wds",
            "sample_size": None,
        },
        "dataset.synth",
    )
    if (s["size"] is None) == (s["samples"] is None):
        raise ConfigError("dataset.synth: give exactly one of size (e.g. 400MB) or samples (e.g. 4000)")
    common: dict[str, Any] = {  # synthesize's keyword arguments: numbers and a format name
        "seed": integer(s["seed"], "dataset.synth.seed"),
        **(
            {"format": "parquet"} if choice(s["format"], FORMATS, "dataset.synth.format") == "parquet" else {}
        ),
        "shard_bytes": size_in_bytes(s["shard_size"], "dataset.synth.shard_size"),
        **_target_kb(s["sample_size"]),
    }
    name = "size" if s["size"] is not None else "samples"
    key = f"dataset.synth.{name}"
    values = as_list(s[name], key)
    out: list[DatasetSpec] = []
    for i, value in enumerate(values):
        at = f"{key}[{i}]" if isinstance(s[name], list) else key
        if name == "size":
            synth, label = {**common, "size_bytes": size_in_bytes(value, at)}, slug(str(value))
        else:
            synth, label = {**common, "samples": integer(value, at, 1)}, f"{value}samples"
        if d["path"] is None:
            words = "-".join(f"{k}{v}" for k, v in sorted(synth.items()) if k != "target_kb")
            if "target_kb" in synth:  # in bytes, as asked: no rounding makes two sizes one name
                words += f"-sample_bytes{round(synth['target_kb'] * KIB)}"
            path = cache_dir() / "datasets" / slug(f"synth-{words}")
        else:
            # several sizes cannot share one directory: each gets its own under the given path
            base = _abspath(d["path"], "dataset.path")
            path = base / label if len(values) > 1 else base
        same = [o for o in out if o.path == path]
        if same:
            raise ConfigError(f"{at}={value!r}: the same dataset as {same[0].label!r}; give each size once")
        out.append(DatasetSpec(path=path, synth=synth, label=label))
    return out
