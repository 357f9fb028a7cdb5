"""Sweep configuration: YAML -> validated plain objects; every error names the key and value.

The embedded default (no servers, a small synthetic dataset in the user's cache directory, the
local tier, workers 0/1/2, an emulated H100 on ResNet-50) lives in configs/default.yaml.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from iobench.cell.ranks.allreduce import DEFAULT_INTERCONNECT, gradient_size_known, interconnect
from iobench.cell.steps.loaderfactory import loader_config
from iobench.results.spec import (
    CACHE_MODES,
    LAYOUTS,
    AcceleratorSpec,
    CellSpec,
    LoaderSettings,
    RunSettings,
)
from iobench.sweep.checkpointspec import CheckpointSection, checkpoint_cells, parse_checkpoints
from iobench.sweep.checks import (
    ConfigError,
    as_list,
    check_keys,
    choice,
    did_you_mean,
    endpoint,
    int_list,
    size_in_bytes,
    slug,
    url,
)
from iobench.sweep.computespec import parse_compute
from iobench.sweep.datasetspec import DATASET_PLACEHOLDER, DatasetSpec, bind_tier, parse_datasets
from iobench.sweep.schema import section
from iobench.tiers import Option, available_tiers, check_tier_spec, get_tier_class
from loaders.config import default
from loaders.options import OptionError
from loaders.registry import available_loaders, backend, undecoded_loaders
from loaders.storage import SourceSpec

CUSTOM_ACCELERATOR = "custom"
RENAMED_TIER_OPTIONS = {"stage": "upload"}  # old name -> new name
# what a loader entry sweeps: a list makes a cell of each value (decode: false reads each sample's
# bytes in full without decoding, MLPerf Storage's reading, in a cell beside the one that decodes)
SWEPT_LOADER_KEYS = {name: [default(name)] for name in ("workers", "batch_size", "decode")}
# an entry's other keys are the other fields of the cell's LoaderSettings, one value each with the
# default written there, and its backend's declared options: a new field is a new key
LOADER_KEYS = {
    "kind": "torch",
    **{
        f.name: f.default
        for f in fields(LoaderSettings)
        if f.name not in ("kind", "options", *SWEPT_LOADER_KEYS)
    },
    **SWEPT_LOADER_KEYS,
}


@dataclass(frozen=True)
class LoaderEntry:
    """One entry of the sweep file's ``loaders:``: its settings (with the first value of each swept
    list) and the lists of workers, batch sizes and decode it sweeps."""

    settings: LoaderSettings
    workers: list[int]
    batch_size: list[int]
    decode: list[bool]

    @property
    def layout(self) -> str:
        return self.settings.layout

    def label(self) -> str:
        """The loader's part of a cell id: its kind, the options given (``nodes-method_process``), and
        extra augment or decode CPU where given (``torch-augment_cpu_ms=2.5``), whole-image decoding
        where asked (``torch-decode_roi=false``)."""
        options = dict(self.settings.options)
        for extra in ("augment_cpu_ms", "decode_cpu_ms"):
            if getattr(self.settings, extra):
                options[extra] = f"{getattr(self.settings, extra):g}"
        if not self.settings.decode_roi:
            options["decode_roi"] = "false"
        return self.settings.kind + "".join(f"-{k}={v}" for k, v in sorted(options.items()))


@dataclass(frozen=True)
class RunSection:
    """The sweep file's ``run:`` section: lists where it sweeps (cache, ranks_per_node); each cell
    gets one value of each (its :class:`RunSettings`)."""

    cache: list[str]
    settings: RunSettings
    ranks_per_node: list[int] = field(default_factory=lambda: [1])


@dataclass(frozen=True)
class SweepConfig:
    datasets: list[DatasetSpec]  # one per size of a size sweep, else one
    tiers: list[dict]  # templates: bind_tier() gives a dataset's tier
    loaders: list[LoaderEntry]
    accelerators: list[AcceleratorSpec]  # a count list is already one entry per count
    run: RunSection
    source: str = field(default="")
    raw: dict = field(default_factory=dict)
    checkpoints: CheckpointSection | None = None  # the checkpoint cells' section (checkpointspec.py)

    def layouts(self) -> set[str]:
        return {loader.layout for loader in self.loaders}

    def cells(self) -> list[CellSpec]:
        cells = []
        several = len(self.datasets) > 1
        for dataset in self.datasets:
            for tier, loader, acc, cache, ranks in itertools.product(
                [bind_tier(t, dataset) for t in self.tiers],
                self.loaders,
                self.accelerators,
                self.run.cache,
                self.run.ranks_per_node,
            ):
                nodes = self.run.settings.nodes
                scale = f"-n{nodes}r{ranks}" if nodes > 1 else f"-r{ranks}" if ranks > 1 else ""
                for workers, batch, decode in itertools.product(
                    loader.workers, loader.batch_size, loader.decode
                ):
                    rate = f"{acc.samples_per_s:g}" if acc.samples_per_s else ""
                    acc_label = (
                        f"{acc.type}{rate}x{acc.count}" if acc.kind == "emulated" else f"torch-{acc.model}"
                    )
                    acc_label += f"-{acc.model}" if acc.kind == "emulated" and acc.model != "resnet50" else ""
                    acc_label += f"-host-{acc.host_work}" if acc.host_work else ""
                    acc_label += f"-{acc.compute.dist}{acc.compute.cv:g}" if acc.compute else ""
                    layout = "" if loader.layout == "shards" else f"-{loader.layout}"
                    layout += "" if decode else "-nodecode"
                    size = f"-{dataset.label}" if several else ""
                    cell_id = slug(
                        f"{tier['name']}{size}{layout}-{loader.label()}-w{workers}-b{batch}-{acc_label}-{cache}{scale}"
                    )
                    cells.append(
                        CellSpec(
                            cell_id=cell_id,
                            tier=tier,
                            loader=replace(
                                loader.settings,
                                workers=workers,
                                batch_size=batch,
                                decode=decode,
                                options=dict(loader.settings.options),
                            ),
                            accelerator=acc,
                            cache=cache,
                            run=replace(self.run.settings, ranks_per_node=ranks),
                            dataset=str(dataset.path),
                        )
                    )
        if self.checkpoints is not None:
            cells += checkpoint_cells(self.checkpoints, self)
        ids = [c.cell_id for c in cells]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ConfigError(
                f"tiers: two cells share the id {dupes[0]!r}; give each tier a distinct name "
                "(or remove the repeated loader or accelerator entry)"
            )
        return cells


def _renamed_options(tier: dict) -> dict:
    """A tier mapping with the options' old names replaced by their new ones (``stage: true`` is
    now ``upload: true``): sweep files written for older versions keep working."""
    out = {RENAMED_TIER_OPTIONS.get(k, k): v for k, v in tier.items()}
    if isinstance(out.get("inner"), dict):
        out["inner"] = _renamed_options(out["inner"])
    return out


def _takes_size(option: Option) -> bool:
    """A tier declares a size as text or a whole number (cache_size, part_size, burst): text with its
    unit from a person, bytes from code that holds them."""
    return option.types == (str, int)


def _tier_values(tier: dict, at: str) -> None:
    """What can be judged of a tier entry before the tier is built: its kind, its keys (a misspelt
    one answered with the closest), sizes with their unit, its URL and endpoints well formed."""
    kind = tier["kind"]
    if not isinstance(kind, str):
        return  # check_tier_spec says what a kind is
    try:
        declared = get_tier_class(kind).options
    except ValueError:
        known = available_tiers()
        raise ConfigError(
            f"{at}.kind={kind!r}: allowed values are {', '.join(known)}" + did_you_mean(kind, known)
        ) from None
    for key, value in tier.items():
        option = declared.get(key)
        if key == "kind" or value is None:
            continue
        if option is None:
            raise ConfigError(
                f"{at}.{key}: not an option of tier kind {kind}; its options are {', '.join(sorted(declared))}"
                + did_you_mean(key, declared)
            )
        if _takes_size(option):
            size_in_bytes(value, f"{at}.{key}")
        elif key == "url":
            url(value, f"{at}.url")
        elif key == "endpoint_url":
            for i, each in enumerate(value if isinstance(value, list) else [value]):
                endpoint(each, f"{at}.endpoint_url" + (f"[{i}]" if isinstance(value, list) else ""))
        elif key == "inner" and isinstance(value, dict) and "kind" in value:
            _tier_values(value, f"{at}.inner")


def _tiers(raw: Any, datasets: list[DatasetSpec]) -> list[dict]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"tiers={raw!r}: expected a non-empty list of tier mappings")
    tiers: list[dict] = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict) or "kind" not in t:
            raise ConfigError(f"tiers[{i}]={t!r}: each tier needs kind (e.g. kind: local)")
        t = _renamed_options(t)
        tiers.extend(_tier(variant, i, datasets) for variant in _one_per_client(t, i))
    return tiers


def _one_per_client(tier: dict, i: int) -> list[dict]:
    """A tier whose kind reads through a choice of object clients and names several
    (``client: [s3fs, minio]``), as one tier per client (one cell each, its name suffixed with the
    client's); any other tier as it is."""
    kind = tier["kind"]
    if not isinstance(kind, str) or kind not in available_tiers():
        return [tier]  # _tier_values and check_tier_spec say what a kind is
    try:
        return get_tier_class(kind).one_per_client(tier)
    except (ValueError, ImportError) as exc:
        raise ConfigError(f"tiers[{i}]: {exc}") from None


def _tier(t: dict, i: int, datasets: list[DatasetSpec]) -> dict:
    """Tier entry ``i`` checked against every dataset it reads, with its name (its kind by default)."""
    bound = [bind_tier(t, d) for d in datasets]
    for tier in bound:
        try:
            _tier_values(tier, f"tiers[{i}]")
        except ImportError as exc:
            raise ConfigError(f"tiers[{i}]: {exc}") from None
        try:
            check_tier_spec(tier)
        except (ValueError, ImportError) as exc:
            raise ConfigError(f"tiers[{i}]: {exc}") from None
    if len(bound) > 1 and bound[0] == bound[1]:
        raise ConfigError(
            f"tiers[{i}] ({bound[0]['name']}): would read the same data for every dataset size; write "
            f"{DATASET_PLACEHOLDER} where it names its data (e.g. url: s3://bucket/synth-{DATASET_PLACEHOLDER})"
            ", or leave path out of a local tier"
        )
    return {"name": t["kind"], **t}


def _loaders(raw: Any) -> list[LoaderEntry]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"loaders={raw!r}: expected a non-empty list of loader mappings")
    out = []
    for i, item in enumerate(raw):
        where = f"loaders[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(item).__name__} {item!r}")
        kind = choice(item.get("kind", LOADER_KEYS["kind"]), tuple(available_loaders()), f"{where}.kind")
        declared = backend(kind).options
        d = check_keys(item, {**LOADER_KEYS, **{k: None for k in declared}}, where)
        options = {k: item[k] for k in declared if k in item}
        try:
            backend(kind).check(options)
        except OptionError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        decode = as_list(d["decode"], f"{where}.decode")
        for j, value in enumerate(decode):
            if not isinstance(value, bool):
                raise ConfigError(f"{where}.decode[{j}]={value!r}: expected true or false")
        if False in decode and not backend(kind).undecoded:
            raise ConfigError(
                f"{where}.decode=false: the {kind!r} loader always decodes; reading without decoding "
                f"needs kind {' or '.join(undecoded_loaders())}"
            )
        workers = int_list(d["workers"], f"{where}.workers", 0)
        batch_size = int_list(d["batch_size"], f"{where}.batch_size", 1)
        choice(d["layout"], LAYOUTS, f"{where}.layout")
        one = {k: d[k] for k in LOADER_KEYS if k not in SWEPT_LOADER_KEYS}
        for key, value in one.items():
            _check_type(value, LOADER_KEYS[key], f"{where}.{key}")
        settings = LoaderSettings(
            **{**one, "kind": kind},
            workers=workers[0],
            batch_size=batch_size[0],
            decode=decode[0],
            options=options,
        )
        try:  # the values are the loaders' to judge, as they judge a cell's
            loader_config(["check"], SourceSpec(), settings, RunSettings())
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        out.append(LoaderEntry(settings, workers, batch_size, decode))
    return out


def _check_type(value: Any, default: Any, key: str) -> None:
    """``value`` of the type of the setting's ``default`` (a number for a float)."""
    want = (int, float) if type(default) is float else type(default)
    if isinstance(value, bool) != isinstance(default, bool) or not isinstance(value, want):
        raise ConfigError(f"{key}={value!r}: expected {type(default).__name__} (default {default!r})")


def _accelerators(raw: Any, run_seed: int = 0) -> list[AcceleratorSpec]:
    from iobench.accelerators.demand import (
        Demand,
        UnknownAccelerator,
        load_accelerator_table,
        lookup_demand,
        models_with_host_work,
    )
    from iobench.accelerators.hostcost import GIVEN_WORK

    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"accelerators={raw!r}: expected a non-empty list of accelerator mappings")
    table = load_accelerator_table()
    out = []
    for i, item in enumerate(raw):
        where = f"accelerators[{i}]"
        # checked from AcceleratorSpec's fields (sweep/schema.py); a count list sweeps, compute is
        # checked against the demand below
        d = section(item, AcceleratorSpec, where, handled={"count": AcceleratorSpec().count, "compute": None})
        kind = d["kind"]
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
            demand = Demand(CUSTOM_ACCELERATOR, d["model"], "custom", float(rate), "given in the sweep file")
        elif kind == "emulated":
            acc_type = choice(d["type"], (*sorted(table), CUSTOM_ACCELERATOR), f"{where}.type")
            choice(d["model"], tuple(sorted(table[acc_type]["models"])), f"{where}.model")
            try:
                demand = lookup_demand(acc_type, d["model"], d["demand"])
            except UnknownAccelerator as exc:
                raise ConfigError(f"{where}: {exc}") from None
        else:
            acc_type, demand = None, None
            choice(d["model"], ("small_cnn", "resnet50"), f"{where}.model")
            if d["compute"] is not None:
                raise ConfigError(
                    f"{where}.compute: a torch model's step takes what it takes; compute is for kind: emulated"
                )
        host_work = d["host_work"]
        if host_work is not None:
            if kind != "emulated":
                raise ConfigError(
                    f"{where}.host_work: only an emulated accelerator does host work of its own"
                )
            if GIVEN_WORK.match(str(host_work)) is None:
                choice(
                    host_work,
                    ("none", *models_with_host_work(), "<N>ms", "<N>ms x<threads>"),
                    f"{where}.host_work",
                )
        compute = parse_compute(d["compute"], f"{where}.compute", demand, run_seed)
        counts = int_list(d["count"], f"{where}.count", 1)
        if kind == "torch" and len(counts) > 1:
            raise ConfigError(
                f"{where}.count={d['count']!r}: a torch model trains on this machine's one device; "
                "a count list needs kind: emulated"
            )
        for count in counts:
            out.append(
                AcceleratorSpec(
                    kind=kind,
                    type=acc_type,
                    model=d["model"],
                    demand=d["demand"],
                    count=count,
                    samples_per_s=float(rate) if rate is not None else None,
                    host_work=host_work,
                    compute=compute,
                )
            )
    return out


def _run(raw: Any) -> RunSection:
    # checked from RunSettings' fields (sweep/schema.py); the caller's own: the swept cache states
    # and rank counts, and the fabric by its name in configs/interconnects.yaml
    d = section(
        raw,
        RunSettings,
        "run",
        handled={
            "cache": ["cold"],
            "ranks_per_node": RunSettings().ranks_per_node,
            "interconnect": DEFAULT_INTERCONNECT,
        },
    )
    ranks = int_list(d["ranks_per_node"], "run.ranks_per_node", 1)
    if d["diagnose"] and (d["nodes"] != 1 or ranks != [1]):
        raise ConfigError(
            f"run.diagnose=true with run.nodes={d['nodes']}, run.ranks_per_node={d['ranks_per_node']!r}: the "
            "ceilings and the capacity answer are measured on one rank; diagnose with one node and one "
            "rank, then sweep the ranks without run.diagnose"
        )
    caches = as_list(d["cache"], "run.cache")
    try:
        fabric = interconnect(d["interconnect"])
    except ValueError as exc:
        raise ConfigError(f"run.interconnect: {exc}") from None
    settings = RunSettings(
        **{k: v for k, v in d.items() if k not in ("cache", "ranks_per_node", "interconnect")},
        interconnect=fabric,
    )
    return RunSection(
        cache=[choice(c, CACHE_MODES, f"run.cache[{i}]") for i, c in enumerate(caches)],
        settings=settings,
        ranks_per_node=ranks,
    )


def parse_config(raw: Any, source: str = "<config>") -> SweepConfig:
    top = check_keys(
        raw,
        {
            "dataset": None,
            "tiers": None,
            "loaders": None,
            "accelerators": None,
            "run": None,
            "checkpoints": None,
        },
        "",
    )
    for key in ("dataset", "tiers", "loaders", "accelerators"):
        if top[key] is None:
            raise ConfigError(f"{key}: missing; see configs/default.yaml for an example")
    datasets = parse_datasets(top["dataset"])
    run = _run(top["run"])
    loaders, accelerators = _loaders(top["loaders"]), _accelerators(top["accelerators"], run.settings.seed)
    if any(False in entry.decode for entry in loaders) and any(a.kind == "torch" for a in accelerators):
        raise ConfigError(
            "loaders: decode=false delivers byte lengths, not images, and a torch model trains on "
            "images; read without decoding for an emulated accelerator (kind: emulated, demand: "
            "mlperf_storage for MLPerf Storage's compute time)"
        )
    several_ranks = run.settings.nodes * max(run.ranks_per_node) > 1
    if several_ranks and run.settings.sync == "allreduce" and run.settings.interconnect is not None:
        for i, acc in enumerate(accelerators):
            if acc.kind == "emulated" and not gradient_size_known(acc, None):
                raise ConfigError(
                    f"accelerators[{i}].model={acc.model!r}: configs/accelerators.yaml has no parameter count "
                    "for it, so its gradient all-reduce cannot be modelled; set run.sync: barrier (MLPerf "
                    "Storage's computation_time is its whole step, all-reduce included)"
                )
    tiers = _tiers(top["tiers"], datasets)
    return SweepConfig(
        datasets=datasets,
        tiers=tiers,
        loaders=loaders,
        accelerators=accelerators,
        run=run,
        source=source,
        raw=raw,
        checkpoints=parse_checkpoints(top["checkpoints"], tiers),
    )


def load_config(path: str | Path | None = None, overrides: Sequence[str] = ()) -> SweepConfig:
    """Read a sweep YAML (``None``: the embedded default), apply ``--set KEY=VALUE`` overrides to
    the raw mapping, then validate, so an error names the key whether it came from file or flag."""
    from iobench.sweep.overrides import apply_overrides

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
    except RecursionError:  # PyYAML's parser recurses once per nesting level
        raise ConfigError(f"{source}: nested too deeply to be a sweep file") from None
    return parse_config(apply_overrides(raw, overrides), source)
