"""What the accelerators will demand: ``--accelerators 8xH100``, or the GPUs NVML found, matched
by name to configs/accelerators.yaml."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypedDict

from iobench.accelerators.demand import (
    UnknownAccelerator,
    accelerator_facts,
    load_accelerator_table,
    load_model_table,
    lookup_demand,
)
from iobench.analysis.decoderate import REFERENCE_SAMPLE_BYTES
from iobench.results.choices import DemandKind


@dataclass(frozen=True)
class AcceleratorDemand:
    count: int
    type: str  # a key of configs/accelerators.yaml
    model: str
    kind: DemandKind  # training (what a real job consumes) | mlperf_storage (MLPerf Storage's emulation)
    samples_per_s_each: float
    source: str  # the figure's source, from configs/accelerators.yaml
    found_by: str  # "--accelerators" or "NVML"
    memory_bytes_each: float  # the table's memory, for RAM rules on a host with no GPU yet
    # the mean sample of the dataset the model trains on, where per-sample CPU is priced (recommend
    # prices it at the same size); the reference size where the table names no dataset
    sample_bytes: float = REFERENCE_SAMPLE_BYTES
    sample_said: str = "ImageNet's ~110 KiB (the model names no dataset in configs/accelerators.yaml)"

    @property
    def samples_per_s(self) -> float:
        return self.count * self.samples_per_s_each


class _Sample(TypedDict, total=False):
    """AcceleratorDemand's sample fields, where the model's dataset names them."""

    sample_bytes: float
    sample_said: str


def parse_accelerators(text: str, model: str, kind: DemandKind = "training") -> AcceleratorDemand:
    """``8xH100`` (count x type, case-insensitive) → its ``kind`` of demand for ``model``."""
    m = re.fullmatch(r"\s*(\d+)\s*[xX×]\s*([A-Za-z0-9_-]+)\s*", text)
    if not m or int(m.group(1)) < 1:
        raise ValueError(f"--accelerators {text!r}: expected COUNTxTYPE, e.g. 8xH100 or 4xA100")
    return _demand(int(m.group(1)), m.group(2).lower(), model, kind, "--accelerators")


def _demand(count: int, acc_type: str, model: str, kind: DemandKind, found_by: str) -> AcceleratorDemand:
    try:
        d = lookup_demand(acc_type, model, kind)
    except UnknownAccelerator as exc:  # names the allowed values, as the sweep file's keys
        raise UnknownAccelerator(f"{exc} (here: --accelerators TYPE, --model, --demand)") from None
    facts = accelerator_facts(acc_type)
    memory = facts.memory_bytes if facts and facts.memory_bytes else 0.0
    dataset = (load_model_table().get(model) or {}).get("dataset")
    sample: _Sample = (
        {"sample_bytes": float(dataset["sample_bytes"]), "sample_said": f"the mean of {dataset['name']}"}
        if dataset
        else {}
    )
    return AcceleratorDemand(
        count, acc_type, model, kind, d.samples_per_s, d.source, found_by, memory, **sample
    )


def demand_of_gpus(
    gpus: list[dict], model: str, kind: DemandKind = "training"
) -> tuple[AcceleratorDemand | None, str | None]:
    """The demand of the GPUs found, when every one's name matches one table entry; else a note why not."""
    if not gpus:
        return None, None
    table = load_accelerator_table()
    types = set()
    for gpu in gpus:
        matches = [t for t in table if re.search(rf"\b{re.escape(t)}\b", gpu["name"].lower())]
        if len(matches) != 1:
            known = ", ".join(sorted(table))
            return None, (
                f"demand: GPU {gpu['index']} ({gpu['name']}) matches no single entry of "
                f"configs/accelerators.yaml ({known}); give --accelerators NxTYPE"
            )
        types.add(matches[0])
    if len(types) > 1:
        return None, f"demand: mixed GPU types ({', '.join(sorted(types))}); give --accelerators NxTYPE"
    acc_type = types.pop()
    if not table[acc_type].get("models"):
        return None, (
            f"demand: configs/accelerators.yaml has no figure for {acc_type} (no public source gives what one "
            "consumes); give its rate to `iobench recommend --per-accelerator N`"
        )
    return _demand(len(gpus), acc_type, model, kind, "NVML"), None
