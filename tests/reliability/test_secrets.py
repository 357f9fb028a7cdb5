"""Credentials never leave the environment: a real sweep against the lab (staging, reads through
the shard cache, a cell that fails against a throttling endpoint), its terminal and HTML reports,
and loaders given the keys explicitly, failing; then every artefact is searched for the secret key
and the access key: each file under the run directory and the cache (names and bytes), stdout and
stderr of every command, exception text and tracebacks, reprs and log records."""

from __future__ import annotations

import logging
import traceback
import uuid
from pathlib import Path

import pytest
import yaml

from iobench.tiers.s3 import S3Tier
from loaders import LoaderConfig, ShardLoader
from loaders.storage.objectstore import ObjectReader, ObjectStoreError
from loaders.storage.spec import SourceSpec
from tests.helpers.faultproxy import FaultProxy


def _leaks(secrets: dict[str, str], where: str, data: bytes | str) -> list[str]:
    blob = data if isinstance(data, bytes) else data.encode("utf-8", "replace")
    return [f"{name} in {where}" for name, value in secrets.items() if value.encode() in blob]


def _files(*roots: Path) -> list[Path]:
    return [p for root in roots for p in sorted(root.rglob("*")) if p.is_file()]


def test_no_artefact_of_a_run_holds_a_credential(
    ceph_lab, iobench_sweep, tiny_dataset, tmp_path, monkeypatch, caplog
):
    for key, value in ceph_lab.env.items():
        monkeypatch.setenv(key, value)
    secrets = {
        "secret key": ceph_lab.env["AWS_SECRET_ACCESS_KEY"],
        "access key": ceph_lab.env["AWS_ACCESS_KEY_ID"],
    }
    url = f"s3://secrets-{uuid.uuid4().hex[:8]}/tiny"
    cache = tmp_path / "cache"
    out = tmp_path / "run"
    found: list[str] = []
    with FaultProxy(ceph_lab.env["AWS_ENDPOINT_URL"], rate=1.0, kinds=["slowdown"]) as throttled:
        cfg = {
            "dataset": {"path": str(tiny_dataset)},
            "tiers": [
                {"kind": "s3", "name": "s3-cache", "url": url, "upload": True, "cache_dir": str(cache)},
                {"kind": "s3", "name": "throttled", "url": url, "endpoint_url": throttled.endpoint},
            ],
            "loaders": [{"kind": "torch", "workers": [1], "batch_size": [32], "shuffle_buffer": 32}],
            "accelerators": [{"kind": "emulated", "type": "h100"}],
            "run": {"warmup_steps": 1, "max_steps": 6},
        }
        config = tmp_path / "sweep.yaml"
        config.write_text(yaml.safe_dump(cfg))
        runs = [iobench_sweep.run("sweep", config, "--out", out)]
    runs += [iobench_sweep.run("report", out), iobench_sweep.run("report", out, "--html")]
    summaries = {p.parent.name: yaml.safe_load(p.read_text()) for p in out.glob("*/summary.json")}
    statuses = sorted((s["cell"]["tier"]["name"], s["status"]) for s in summaries.values())
    assert statuses == [("s3-cache", "ok"), ("throttled", "failed")], runs[0].stdout + runs[0].stderr
    failed = next(s for s in summaries.values() if s["status"] == "failed")
    assert "gave up after" in failed["error"] and throttled.endpoint in failed["error"]
    assert (out / "report.html").exists() and any(p.name.endswith(".tar") for p in cache.iterdir())
    for run in runs:
        found += _leaks(secrets, f"{run.args[3:]} stdout", run.stdout)
        found += _leaks(secrets, f"{run.args[3:]} stderr", run.stderr)
    files = _files(out, cache, Path(tiny_dataset))
    assert len(files) > 20
    for path in files:
        found += _leaks(secrets, str(path), path.read_bytes())
        found += _leaks(secrets, f"the name {path}", str(path))

    # the loaders, given the keys explicitly rather than through the environment, failing
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    options = S3Tier(url=url, endpoint_url="http://127.0.0.1:9").storage_options()
    options.update(key=secrets["access key"], secret=secrets["secret key"])
    caplog.set_level(logging.INFO)
    reader = ObjectReader(options)
    with pytest.raises(ObjectStoreError) as info:
        reader.read_range(f"{url}/train-000000.tar", 0, 10)
    found += _leaks(secrets, "an ObjectStoreError", str(info.value) + repr(info.value))
    found += _leaks(secrets, "its traceback", "".join(traceback.format_exception(info.value)))
    found += _leaks(secrets, "request stats", repr(reader.take_stats().as_dict()))
    spec = SourceSpec(storage_options=options)
    found += _leaks(secrets, "repr(SourceSpec)", repr(spec))
    loader = ShardLoader([f"{url}/train-000000.tar"], workers=0, storage_options=options)
    with pytest.raises(ObjectStoreError) as info:
        list(loader)
    found += _leaks(secrets, "a loader's error", "".join(traceback.format_exception(info.value)))
    found += _leaks(secrets, "a loader's stats", repr(loader.stats.as_dict()))
    found += _leaks(secrets, "log records", "\n".join(r.getMessage() for r in caplog.records))
    print(
        f"figures: secrets: searched {len(files)} files, {2 * len(runs)} output streams, errors, reprs, logs"
    )
    assert found == []


def test_a_loader_config_repr_hides_credentials_passed_in_its_options():
    config = LoaderConfig(
        urls=["s3://b/x.tar"], storage_options={"key": "AKIDEXAMPLE", "secret": "s3cr3t-value"}
    )
    assert "s3cr3t-value" not in repr(config) and "AKIDEXAMPLE" not in repr(config)
