"""Hostile input, metadata: manifests, sweep files and ``--set`` strings with any field replaced
by any value (property-based, hypothesis), shard names that leave their dataset, and error text
that the terminal report must print as text. (Shards: test_hostile_input.py.)

The property: a result, or an error of the documented type (ManifestError, ConfigError, both
ValueErrors) whose message names the file and the key; never another exception.
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from rich.console import Console

from iobench.datasets.manifest import MANIFEST_NAME, Manifest, ManifestError
from iobench.sweep.checks import ConfigError
from iobench.sweep.config import load_config, parse_config
from iobench.sweep.overrides import apply_overrides
from tests.helpers.faultkit import FUZZ
from tests.helpers.runs import exact_epochs

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=20,
)


def _manifest_dict() -> dict:
    shards = [
        {"name": f"train-{i:06d}.tar", "bytes": 100, "samples": 2, "sha256": "0" * 64} for i in range(2)
    ]
    return {
        "format": "wds",
        "shards": shards,
        "num_samples": 4,
        "total_bytes": 200,
        "mean_sample_bytes": 50.0,
        "classes": 10,
        "class_names": None,
        "source": {"generator": "test"},
        "schema_version": 1,
        "mean_jpeg_bytes": 40.0,
    }


def _paths(obj, prefix=()) -> list[tuple]:
    """Every key path of a nested dict/list."""
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


def _one_field_replaced(data: st.DataObject, raw: dict, value) -> dict:
    """``raw`` with one of its fields at any depth (drawn by ``data``) set to ``value``, as it reads
    back from JSON."""
    path = data.draw(st.sampled_from(_paths(raw)[1:]))
    obj = raw
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value
    return json.loads(json.dumps(raw))


@FUZZ
@given(data=st.data(), value=JSON)
def test_a_manifest_with_any_field_replaced_loads_or_names_the_problem(data, value):
    raw = _one_field_replaced(data, _manifest_dict(), value)
    try:
        Manifest.from_dict(raw, where="s3://b/manifest.json")
    except ManifestError as exc:
        assert str(exc).startswith("s3://b/manifest.json: ")


@FUZZ
@given(st.binary(max_size=300) | JSON.map(lambda v: json.dumps(v).encode()))
def test_manifest_files_of_any_bytes_load_or_raise_a_manifest_error(tmp_path_factory, data):
    directory = tmp_path_factory.mktemp("manifest")
    (directory / MANIFEST_NAME).write_bytes(data)
    with contextlib.suppress(ManifestError):
        Manifest.load(directory)


@pytest.mark.parametrize(
    "name", ["/etc/passwd", "../other/train-000000.tar", "a/../../b.tar", "", "a\0b.tar"]
)
def test_a_manifest_naming_a_shard_outside_its_dataset_is_refused(name):
    raw = _manifest_dict()
    raw["shards"][0]["name"] = name
    with pytest.raises(ManifestError, match=r"shards\[0\]\.name"):
        Manifest.from_dict(raw)


@pytest.mark.parametrize(("key", "value"), [("bytes", -1), ("samples", -5), ("num_samples", -1)])
def test_negative_counts_in_a_manifest_are_refused(key, value):
    raw = _manifest_dict()
    if key == "num_samples":
        raw[key] = value
    else:
        raw["shards"][0][key] = value
    with pytest.raises(ManifestError):
        Manifest.from_dict(raw)


def _sweep() -> dict:
    return {
        "dataset": {"path": "/data/in1k-shards"},
        "tiers": [{"kind": "local", "name": "disk"}, {"kind": "s3", "url": "s3://b/p", "cache_dir": "/c"}],
        "loaders": [{"kind": "torch", "workers": [0, 2], "batch_size": [16]}],
        "accelerators": [{"kind": "emulated", "type": "h100", "count": [1, 2]}],
        "run": {"warmup_steps": 2, "epochs": 1, "cache": ["cold"], "min_measure": exact_epochs()},
    }


@FUZZ
@given(data=st.data(), value=JSON)
def test_a_sweep_file_with_any_field_replaced_parses_or_raises_a_config_error(data, value):
    raw = _one_field_replaced(data, _sweep(), value)
    with contextlib.suppress(ConfigError):
        parse_config(raw).cells()


@FUZZ
@given(text=st.text(max_size=200))
def test_sweep_file_text_of_any_kind_loads_or_raises_a_config_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("sweep") / "sweep.yaml"
    path.write_text(text)
    with contextlib.suppress(ConfigError):
        load_config(path)


@FUZZ
@given(text=st.text(max_size=80) | st.from_regex(r"[a-z_.\[\]0-9]{1,20}=.{0,20}", fullmatch=True))
def test_any_override_string_applies_or_raises_a_config_error(text):
    assume("\n" not in text)
    with contextlib.suppress(ConfigError):
        parse_config(apply_overrides(_sweep(), [text]))


def test_yaml_whose_aliases_refer_to_themselves_is_a_config_error(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(
        "dataset: &x {path: *x}\ntiers: [{kind: local}]\nloaders: [{kind: torch}]\naccelerators: [{type: h100}]\n"
    )
    with pytest.raises(ConfigError, match=r"dataset\.path"):
        load_config(path)


def test_yaml_nested_too_deeply_is_a_config_error(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text("x: " + "[" * 100_000)
    with pytest.raises(ConfigError):
        load_config(path)


def test_an_error_with_brackets_is_printed_as_text_by_the_terminal_report():
    from iobench.report.terminal import print_report
    from iobench.results.summary import CellSummary

    summary = CellSummary.failed(parse_config(_sweep()).cells()[0], "cannot open [/dev/nvme0n1]")
    out = io.StringIO()
    print_report([summary], Console(file=out, width=200))
    assert "cannot open [/dev/nvme0n1]" in out.getvalue()
