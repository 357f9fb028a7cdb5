"""What a dry run checks before any cell runs: sweep-file values refused as written (sizes without
a unit, URLs and endpoints that are none, misspelt keys answered with the closest), and, with every
tier built, dataset directories, where each object tier's requests go, a generated dataset a tier
will not find, and endpoints that take no connection. Only loopback is ever connected to."""

from __future__ import annotations

import socket

import pytest

from iobench.sweep.config import ConfigError, parse_config
from iobench.sweep.preflight import preflight


@pytest.fixture(autouse=True)
def no_aws_settings(monkeypatch, tmp_path):
    """An environment that names no endpoint: an s3 tier without one goes to AWS (said, not tried)."""
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "S3_ENDPOINT_URL", "AWS_PROFILE", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("IOBENCH_CACHE", str(tmp_path / "cache"))


def _raw(*tiers: dict, dataset: dict | None = None) -> dict:
    return {
        "dataset": dataset or {"synth": {"samples": 64}},
        "tiers": list(tiers),
        "loaders": [{"kind": "torch", "workers": [0]}],
        "accelerators": [{"kind": "emulated", "type": "h100"}],
    }


def _s3(**options) -> dict:
    return {"kind": "s3", "name": "minio", "url": "s3://training/in1k", "upload": True, **options}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            _raw(_s3(url="s3:/training")),
            "tiers[0].url='s3:/training': not a URL; write scheme://bucket/prefix, e.g. s3://training",
        ),
        (
            _raw(_s3(endpoint_url="minio:9000")),
            "tiers[0].endpoint_url='minio:9000': not an endpoint URL; write its scheme and host, e.g. "
            "http://minio:9000 (https://minio:9000 for TLS)",
        ),
        (
            _raw(_s3(endpoint_url=["http://a:9000", "b:9000"])),
            "tiers[0].endpoint_url[1]='b:9000': not an endpoint URL",
        ),
        (
            _raw(_s3(endpoint_url="http://minio:port")),
            "tiers[0].endpoint_url='http://minio:port': the port is not a number",
        ),
        (
            _raw(_s3(cache_dir="/tmp/c", cache_size=2000000000)),
            "tiers[0].cache_size=2000000000: '2000000000' has no unit: write it after the number, e.g. "
            "'2000000000B' if it counts bytes",
        ),
        (_raw(_s3(memory_cache="64")), "tiers[0].memory_cache='64': '64' has no unit"),
        (
            _raw(
                {
                    "kind": "throttled",
                    "inner": {"kind": "local", "path": "/tmp"},
                    "bandwidth": "50MB/s",
                    "burst": 1,
                }
            ),
            "tiers[0].burst=1: '1' has no unit",
        ),
        (
            _raw(
                {
                    "kind": "throttled",
                    "inner": {"kind": "s3", "url": "s3://b/p", "part_size": "8"},
                    "latency_ms": 1,
                }
            ),
            "tiers[0].inner.part_size='8': '8' has no unit",
        ),
        (
            _raw({"kind": "local"}, dataset={"synth": {"samples": 64, "shard_size": 128}}),
            "dataset.synth.shard_size=128: '128' has no unit: write it after the number, e.g. '128GB' or '128MiB'",
        ),
        (
            _raw({"kind": "local"}, dataset={"synth": {"size": "400"}}),
            "dataset.synth.size='400': '400' has no unit",
        ),
        (
            _raw(_s3(cache_sise="2GB")),
            "tiers[0].cache_sise: not an option of tier kind s3; its options are cache_dir, cache_policy, "
            "cache_size, client, concurrency, deadline_s, endpoint_url, keep_memory_cache, memory_cache, name, "
            "part_size, path_style, profile, region, upload, url; did you mean cache_size?",
        ),
        (
            _raw({"kind": "loacl"}),
            "tiers[0].kind='loacl': allowed values are cephfs, local, rados, s3, throttled; did you mean local?",
        ),
        (
            _raw({"kind": "local"}, dataset={"synth": {"samples": 64, "shard_sise": "12MB"}}),
            "dataset.synth.shard_sise: unknown key; allowed keys here are format, sample_size, samples, seed, "
            "shard_size, size; did you mean shard_size?",
        ),
    ],
)
def test_a_value_no_tier_could_use_is_refused_as_written(raw, message):
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    assert message in str(err.value)


def test_a_misspelt_section_is_answered_with_the_closest():
    raw = _raw({"kind": "local"})
    raw["run"] = {"epoch": 2}
    with pytest.raises(
        ConfigError, match=r"run\.epoch: unknown key; allowed keys .*; did you mean epochs\?$"
    ):
        parse_config(raw)
    raw = _raw({"kind": "local"})
    raw["accelerators"][0]["type"] = "h10"
    with pytest.raises(
        ConfigError, match=r"accelerators\[0\]\.type='h10': allowed values are .*; did you mean h100\?$"
    ):
        parse_config(raw)
    raw = _raw({"kind": "local"})
    raw["tier"] = raw.pop("tiers")
    with pytest.raises(ConfigError, match=r"tier: unknown key; allowed keys .*; did you mean tiers\?$"):
        parse_config(raw)


def test_a_dataset_read_here_must_exist_with_its_manifest(tmp_path):
    missing = tmp_path / "in1k"
    checked = preflight(parse_config(_raw({"kind": "local"}, dataset={"path": str(missing)})))
    assert checked.errors == [
        f"dataset.path: {missing} does not exist; tier local reads it on this host. `iobench dataset pack "
        f"IMAGEFOLDER --out {missing}` packs an ImageFolder tree there, `iobench dataset synth --out {missing} "
        "--size 2GB` generates one; or write dataset: {synth: {size: 2GB}} to have the sweep generate it"
    ]
    missing.mkdir()
    (checked,) = preflight(parse_config(_raw({"kind": "local"}, dataset={"path": str(missing)}))).errors
    assert f"dataset.path: {missing} holds no manifest.json, so it is no dataset iobench made" in checked


def test_a_dataset_only_a_store_reads_may_be_elsewhere(tmp_path):
    """A sweep on a client node reads the store's copy: its own missing copy is said, not refused."""
    raw = _raw(_s3(upload=False, endpoint_url="http://127.0.0.1:1"), dataset={"path": str(tmp_path / "x")})
    checked = preflight(parse_config(raw), connect_timeout_s=0.5)
    assert not checked.errors
    (warning,) = [f.text for f in checked.findings if "dataset.path" in f.text]
    assert "does not exist on this host: the tiers read their own copies" in warning


def test_an_s3_tier_without_an_endpoint_is_said_to_go_to_aws():
    checked = preflight(parse_config(_raw(_s3(), _s3(name="eu", region="eu-west-1"))))
    notes = [f.text for f in checked.findings if f.level == "note"]
    assert notes[0].startswith(
        "tiers[0] (minio) s3://training/in1k: requests go to AWS S3, region us-east-1"
    ), notes
    assert (
        "tiers[1] (eu) s3://training/in1k: requests go to AWS S3, region eu-west-1: no endpoint_url"
        in notes[1]
    )
    assert checked.connected == 0 and not checked.errors  # AWS is not tried


def test_the_endpoint_is_the_one_the_environment_names(monkeypatch):
    with socket.create_server(("127.0.0.1", 0)) as server:
        endpoint = f"http://127.0.0.1:{server.getsockname()[1]}"
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        checked = preflight(parse_config(_raw(_s3())))
    assert [f.text for f in checked.findings] == [
        f"tiers[0] (minio) s3://training/in1k: requests go to {endpoint} (from AWS_ENDPOINT_URL, region us-east-1)"
    ]
    assert checked.connected == 1


def test_an_endpoint_that_takes_no_connection_is_a_warning():
    with socket.create_server(("127.0.0.1", 0)) as server:
        up = f"http://127.0.0.1:{server.getsockname()[1]}"
        with socket.create_server(("127.0.0.1", 0)) as gone:
            down = f"http://127.0.0.1:{gone.getsockname()[1]}"
        checked = preflight(parse_config(_raw(_s3(endpoint_url=up), _s3(name="old", endpoint_url=down))))
    warnings = [f.text for f in checked.findings if f.level == "warning"]
    assert warnings == [
        f"tiers[1] (old): {down} did not take a connection (Connection refused): is the server up, and is "
        "this the right host and port?"
    ]
    assert checked.connected == 2 and not checked.errors


def test_a_generated_dataset_is_in_the_bucket_only_when_a_tier_uploads_it():
    endpoint = "http://127.0.0.1:1"
    checked = preflight(parse_config(_raw(_s3(upload=False, endpoint_url=endpoint))), connect_timeout_s=0.5)
    (warning,) = [f.text for f in checked.findings if "upload" in f.text]
    assert warning.startswith(
        "tiers[0] (minio) reads s3://training/in1k, but the sweep generates the dataset on this host"
    )
    assert "it will not be there unless this tier, or another of the same store, has upload: true" in warning
    # one tier of the same store uploads it for the others
    raw = _raw(
        _s3(endpoint_url=endpoint),
        _s3(name="cached", upload=False, endpoint_url=endpoint, memory_cache="1GB"),
    )
    assert not [f for f in preflight(parse_config(raw), connect_timeout_s=0.5).findings if "upload" in f.text]


def test_a_local_tier_elsewhere_does_not_read_the_generated_dataset(tmp_path):
    checked = preflight(parse_config(_raw({"kind": "local", "name": "raid", "path": str(tmp_path)})))
    (warning,) = [f.text for f in checked.findings]
    assert warning.startswith(
        f"tiers[0] (raid) reads {tmp_path}, not the directory where the sweep generates"
    )


def test_a_tier_that_cannot_be_built_is_an_error(tmp_path):
    raw = _raw({"kind": "rados", "url": "rados://pool/in1k", "conffile": str(tmp_path / "ceph.conf")})
    assert preflight(parse_config(raw)).errors == [
        f"tiers[0] (rados): rados tier: conffile {str(tmp_path / 'ceph.conf')!r} does not exist"
    ]


def test_the_dry_run_prints_the_plan_then_refuses(iobench, tmp_path):
    import yaml

    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(_raw({"kind": "local"}, dataset={"path": str(tmp_path / "none")})))
    proc = iobench("sweep", path, "--dry-run", "--out", tmp_path / "run")
    assert proc.returncode == 2
    assert "1 cell(s) planned" in proc.stdout and "dry run: nothing was run" in proc.stdout
    assert f"error: dataset.path: {tmp_path / 'none'} does not exist" in proc.stderr
    assert not (tmp_path / "run").exists()
