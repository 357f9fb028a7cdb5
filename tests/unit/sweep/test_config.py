"""Planning a sweep: --set overrides, accelerator-count and dataset-size dimensions, --dry-run with
its estimate, and every example in configs/ validating without any server."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
import yaml

from iobench.analysis.decoderate import ASSUMED, REFERENCE_SAMPLE_BYTES, given
from iobench.sweep.config import ConfigError, load_config, parse_config
from iobench.sweep.estimate import CAPACITY_RUNS, CEILINGS_S, CELL_START_S, RUN_START_S, estimate_cell
from iobench.sweep.overrides import apply_overrides, parse_assignment
from tests.helpers.paths import ROOT

CONFIGS = ROOT / "configs"


def _raw(**run) -> dict:
    return {
        "dataset": {"path": "/data/in1k-shards"},
        "tiers": [
            {"kind": "local", "name": "nvme"},
            {"kind": "local", "name": "sata", "path": "/mnt/sata/in1k"},
        ],
        "loaders": [{"kind": "torch", "workers": [2]}, {"kind": "nodes", "workers": [4], "batch_size": [32]}],
        "accelerators": [{"kind": "emulated", "type": "h100"}],
        "run": run,
    }


@pytest.mark.parametrize(
    ("text", "path", "value"),
    [
        ("run.epochs=2", ["run", "epochs"], 2),
        ("loaders[0].workers=[1, 2,4]", ["loaders", 0, "workers"], [1, 2, 4]),
        ("dataset.synth.size=4GB", ["dataset", "synth", "size"], "4GB"),
        ("tier.upload=true", ["tier", "upload"], True),
        ("dataset={synth: {samples: 64}}", ["dataset"], {"synth": {"samples": 64}}),
        ("tiers[1].name=a=b", ["tiers", 1, "name"], "a=b"),  # only the first = splits
        ("run.max_steps=", ["run", "max_steps"], None),
    ],
)
def test_an_assignment_is_a_dotted_key_and_a_yaml_value(text, path, value):
    key, got_path, got = parse_assignment(text)
    assert (key, got_path, got) == (text.partition("=")[0], path, value)


def test_overrides_change_a_copy_and_loader_x_means_every_loader():
    raw = _raw()
    out = apply_overrides(raw, ["loader.workers=[1,2]", "loaders[1].batch_size=[8]", "run.epochs=3"])
    assert raw == _raw()  # the file's mapping is untouched
    assert [entry["workers"] for entry in out["loaders"]] == [[1, 2], [1, 2]]
    assert out["loaders"][1]["batch_size"] == [8] and out["loaders"][0].get("batch_size") is None
    assert out["run"] == {"epochs": 3}
    out = apply_overrides(
        raw, ["tier.drop_caches=true", "accelerator[0].count=[1, 8]", "loader[1].kind=torch"]
    )
    assert all(t["drop_caches"] is True for t in out["tiers"])
    assert out["accelerators"][0]["count"] == [1, 8] and out["loaders"][1]["kind"] == "torch"
    # the result validates like a file
    cfg = parse_config(out)
    assert sorted({c.accelerator.count for c in cfg.cells()}) == [1, 8]


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("run.bogus=1", "run.bogus: unknown key; allowed keys here are allreduce_overlap, cache"),
        (
            "loader.worker=[2]",
            "loaders[0].worker: unknown key; allowed keys here are augment_cpu_ms, batch_size",
        ),
        ("bogus.x=1", "bogus: unknown key; allowed keys here are accelerators, checkpoints, dataset"),
        ("tier.pth=/x", "tiers[0].pth: not an option of tier kind local; its options are"),
        ("loaders[5].workers=1", "--set loaders[5].workers: loaders[5] does not exist (loaders has 2)"),
        ("run.cache.x=1", "--set run.cache.x: run.cache=['cold'] is not a mapping"),
        ("loader=[1]", "--set loader: name what to set in every entry of loaders"),
        ("workers", "--set 'workers': expected KEY=VALUE"),
        ("run..epochs=1", "--set run..epochs: '' is not a key"),
        ("run.epochs=[1", "--set run.epochs='[1': not a YAML value"),
        ("loader.workers=[-1]", "loaders[0].workers[0]=-1: expected an integer >= 0"),
        ("loader.workers=[2, 2]", "loaders[0].workers=[2, 2]: 2 is listed twice"),
    ],
)
def test_a_bad_override_names_the_key(assignment, message):
    with pytest.raises(ConfigError) as err:
        parse_config(apply_overrides(_raw(cache=["cold"]), [assignment]))
    assert message in str(err.value)


def test_an_accelerator_count_list_makes_one_cell_per_count():
    raw = _raw()
    raw["accelerators"] = [{"kind": "emulated", "type": "a100", "count": [1, 2, 4, 8]}]
    raw["loaders"] = raw["loaders"][:1]
    ids = [c.cell_id for c in parse_config(raw).cells()]
    assert ids == [f"{tier}-torch-w2-b64-a100x{n}-cold" for tier in ("nvme", "sata") for n in (1, 2, 4, 8)]
    for count, message in (
        ([1, 0], "accelerators[0].count[1]=0: expected an integer >= 1"),
        ([4, 4], "accelerators[0].count=[4, 4]: 4 is listed twice"),
        ([], "accelerators[0].count=[]: give at least one value"),
    ):
        raw["accelerators"][0]["count"] = count
        with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
            parse_config(raw)
    raw["accelerators"] = [{"kind": "torch", "model": "small_cnn", "count": [1, 2]}]
    with pytest.raises(ConfigError, match="a count list needs kind: emulated"):
        parse_config(raw)


def test_a_decode_list_makes_the_mlperf_mode_cell_beside_the_same_cell_decoding():
    raw = _raw()
    raw["tiers"] = raw["tiers"][:1]
    raw["loaders"] = [{"kind": "torch", "workers": [2], "decode": [False, True]}]
    raw["accelerators"] = [{"kind": "emulated", "type": "h100", "demand": "mlperf_storage"}]
    cells = parse_config(raw).cells()
    assert [c.cell_id for c in cells] == [
        "nvme-nodecode-torch-w2-b64-h100x1-cold",
        "nvme-torch-w2-b64-h100x1-cold",
    ]
    assert [(c.loader.decode, c.mlperf_mode) for c in cells] == [(False, True), (True, False)]
    assert replace(cells[0], cell_id="", loader=replace(cells[0].loader, decode=True)) == replace(
        cells[1], cell_id=""
    )  # the pair differs in decoding only
    assert all(c.loader.decode for c in parse_config(_raw()).cells())  # decoding is the default
    for loader, accelerator, message in (
        ({"decode": "no"}, {}, "loaders[0].decode[0]='no': expected true or false"),
        (
            {"kind": "dali", "decode": False},
            {},
            "the 'dali' loader always decodes; reading without decoding needs kind nodes or threads or torch",
        ),
        ({"decode": [False]}, {"kind": "torch", "model": "small_cnn"}, "a torch model trains on images"),
    ):
        bad = _raw()
        bad["loaders"] = [{"kind": "torch", **loader}]
        bad["accelerators"] = [{"kind": "emulated", "type": "h100", **accelerator}]
        if accelerator.get("kind") == "torch":
            bad["accelerators"] = [accelerator]
        with pytest.raises(ConfigError, match=re.escape(message)):
            parse_config(bad)


def test_a_loader_entrys_one_value_keys_are_the_cells_loader_settings_checked_by_the_loaders():
    raw = _raw()
    raw["loaders"] = [{"kind": "torch", "workers": [1, 2], "prefetch": 4, "shuffle_buffer": 0}]
    cells = parse_config(raw).cells()
    assert {(c.loader.workers, c.loader.prefetch, c.loader.shuffle_buffer) for c in cells} == {
        (1, 4, 0),
        (2, 4, 0),
    }
    for loader, message in (
        ({"prefetch": "2"}, "loaders[0].prefetch='2': expected int (default 2)"),
        ({"prefetch": 0}, "loaders[0]: prefetch=0: must be 1 or more"),
        ({"shuffle_buffer": -1}, "loaders[0]: shuffle_buffer=-1: must be 0 or more"),
    ):
        bad = _raw()
        bad["loaders"] = [{"kind": "torch", **loader}]
        with pytest.raises(ConfigError, match=re.escape(message)):
            parse_config(bad)


def test_a_dataset_size_list_makes_one_dataset_and_its_cells_per_size(tmp_path, monkeypatch):
    monkeypatch.setenv("IOBENCH_CACHE", str(tmp_path / "cache"))
    raw = {
        "dataset": {"synth": {"size": ["1GB", "4GB"], "shard_size": "64MB"}},
        "tiers": [
            {"kind": "local", "name": "nvme"},
            {"kind": "s3", "name": "minio", "url": "s3://bucket/synth-{dataset}", "cache_size": "2GB"},
        ],
        "loaders": [{"workers": [4]}],
        "accelerators": [{"type": "h100"}],
    }
    cfg = parse_config(raw)
    assert [(d.label, d.synth["size_bytes"]) for d in cfg.datasets] == [("1GB", 10**9), ("4GB", 4 * 10**9)]
    assert len({d.path for d in cfg.datasets}) == 2
    cells = cfg.cells()
    assert [c.cell_id for c in cells] == [
        "nvme-1GB-torch-w4-b64-h100x1-cold",
        "minio-1GB-torch-w4-b64-h100x1-cold",
        "nvme-4GB-torch-w4-b64-h100x1-cold",
        "minio-4GB-torch-w4-b64-h100x1-cold",
    ]
    # each cell names its dataset; each tier reads that dataset: the local one where it was
    # generated, the remote one where {dataset} puts it
    assert [c.dataset for c in cells] == [str(cfg.datasets[0].path)] * 2 + [str(cfg.datasets[1].path)] * 2
    assert [c.tier.get("path") or c.tier["url"] for c in cells] == [
        str(cfg.datasets[0].path),
        "s3://bucket/synth-1GB",
        str(cfg.datasets[1].path),
        "s3://bucket/synth-4GB",
    ]
    # a tier with one fixed location would measure the same data under two labels
    raw["tiers"][1]["url"] = "s3://bucket/synth"
    with pytest.raises(
        ConfigError, match=r"tiers\[1\] \(minio\): would read the same data for every dataset size"
    ):
        parse_config(raw)
    # under a given path, each size gets a directory of its own
    cfg = parse_config(apply_overrides(raw, ["tiers[1].url=s3://b/{dataset}", f"dataset.path={tmp_path}"]))
    assert [d.path for d in cfg.datasets] == [tmp_path / "1GB", tmp_path / "4GB"]
    samples = ["tiers[1].url=s3://b/{dataset}", "dataset.synth.size=null", "dataset.synth.samples=[64, 128]"]
    cfg = parse_config(apply_overrides(raw, samples))
    assert [d.label for d in cfg.datasets] == ["64samples", "128samples"]
    for size, message in (
        (["1GB", "1GB"], r"dataset.synth.size=\['1GB', '1GB'\]: '1GB' is listed twice"),
        (["1GB", "1000MB"], r"dataset.synth.size\[1\]='1000MB': the same dataset as '1GB'"),
        (["1GB", "lots"], r"dataset.synth.size\[1\]='lots': not a size"),
    ):
        with pytest.raises(ConfigError, match=message):
            parse_config(
                apply_overrides(raw, ["tiers[1].url=s3://b/{dataset}", f"dataset.synth.size={size}"])
            )


RATE = given(900.0)  # samples/s per core at the reference sample size


def test_the_estimate_follows_the_documented_model():
    cell = parse_config(_raw(max_steps=10)).cells()[0]  # workers 2, batch 64, h100 (7,000/s)
    est = estimate_cell(cell, samples_in_dataset=10_000, cores=1, decode=RATE)
    assert (est.samples, est.samples_per_s) == (640, 900.0)  # max_steps x batch; one core decodes
    # samples twice the size the rate was given at: decode takes twice as long
    twice = estimate_cell(cell, 10_000, 1, RATE, sample_bytes=2 * REFERENCE_SAMPLE_BYTES)
    assert twice.samples_per_s == pytest.approx(450.0)
    assert est.seconds == pytest.approx(CELL_START_S + RUN_START_S + 640 / 900)
    # read without decoding, the accelerator sets the pace, not one core's decode
    undecoded = replace(cell, loader=replace(cell.loader, decode=False))
    assert estimate_cell(undecoded, 10_000, 1, RATE).samples_per_s == pytest.approx(7000.0)
    cell = replace(
        cell,
        accelerator=replace(cell.accelerator, type="custom", samples_per_s=100.0, count=2),  # demand caps
        run=replace(cell.run, repeats=3, diagnose=True, max_steps=None, epochs=2),
    )
    est = estimate_cell(cell, samples_in_dataset=1000, cores=8, decode=RATE)
    assert (est.samples, est.samples_per_s) == (2000, 200.0)
    assert est.seconds == pytest.approx(CELL_START_S + CEILINGS_S + (3 + CAPACITY_RUNS) * (RUN_START_S + 10))
    assert estimate_cell(cell, samples_in_dataset=None, cores=8, decode=RATE).seconds is None
    # 4 ranks per node on 2 nodes: this node reads half the data, with 4 ranks' workers and demand
    cell = replace(
        cell, run=replace(cell.run, ranks_per_node=4, nodes=2, repeats=1, diagnose=False, epochs=1)
    )
    est = estimate_cell(cell, samples_in_dataset=1000, cores=8, decode=RATE)
    assert (est.samples, est.samples_per_s) == (500, 800.0)
    # 500 samples at 800/s are 0.6 s: the window runs more epochs up to run.min_measure's 5 s
    assert est.seconds == pytest.approx(CELL_START_S + RUN_START_S + 5.0)


def test_dry_run_lists_cells_and_estimate_and_touches_nothing(iobench, tmp_path, monkeypatch):
    monkeypatch.setenv("IOBENCH_CACHE", str(tmp_path / "cache"))  # no calibration of this host there
    monkeypatch.setenv("COLUMNS", "300")  # the table's widest cell id on one line
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "S3_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)  # the s3 tier goes to AWS: said, never tried
    cfg = {
        "dataset": {"synth": {"samples": [300, 600]}},
        "tiers": [
            {"kind": "local", "name": "disk"},
            {"kind": "s3", "url": "s3://nowhere/{dataset}", "upload": True},
        ],
        "loaders": [{"workers": [1]}],
        "accelerators": [{"type": "h100"}],
    }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "run"
    proc = iobench(
        "diagnose",
        path,
        "--dry-run",
        "--out",
        out,
        "--set",
        "loader.workers=[1,2]",
        "--set",
        "accelerator.count=[1,2]",
    )
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    # 2 sizes x 2 tiers x 2 workers x 2 counts
    assert "16 cell(s) planned" in text and "estimated total:" in text
    for size in ("300samples", "600samples"):
        for tier in ("disk", "s3"):
            for w in (1, 2):
                for n in (1, 2):
                    assert f"{tier}-{size}-torch-w{w}-b64-h100x{n}-cold" in "".join(text.split()), (
                        tier,
                        size,
                        w,
                        n,
                    )
    flat = "".join(text.split())  # the console wraps long lines anywhere
    assert "Estimate,notameasurement" in flat and "diagnoseadds" in flat
    # the per-core rate is the one every command uses, named as the assumption it is here
    assert "".join(f"{ASSUMED.describe(REFERENCE_SAMPLE_BYTES)}".split()) in flat
    assert "tiers[1] (s3) s3://nowhere/{dataset}: requests go to AWS S3, region us-east-1" in text
    assert "dry run: nothing was run, generated or uploaded\n" in text  # and no endpoint tried
    datasets = load_config(path).datasets
    assert not out.exists() and not any(d.path.exists() for d in datasets)


def test_the_cli_reports_a_bad_override_without_a_traceback(iobench, tmp_path):
    proc = iobench("sweep", "--dry-run", "--set", "loader.wrokers=[1]", cwd=tmp_path)
    assert proc.returncode == 2
    assert "loaders[0].wrokers: unknown key" in " ".join(proc.stderr.split())
    assert "Traceback" not in proc.stderr
    proc = iobench("sweep", "--resume", cwd=tmp_path)
    assert proc.returncode == 2 and "--resume needs --out" in proc.stderr


@pytest.mark.parametrize(
    "path",
    sorted(
        p.name
        for p in CONFIGS.glob("*.yaml")
        if p.name not in ("accelerators.yaml", "interconnects.yaml", "servers.yaml")
    ),
)
def test_every_example_config_validates_and_plans_without_servers(iobench, path, tmp_path):
    cfg = load_config(CONFIGS / path)
    assert cfg.cells()
    proc = iobench("sweep", CONFIGS / path, "--dry-run", cwd=tmp_path)
    # the dry run builds every tier: a CephFS tier needs its mount (`iobench lab up --cephfs`), and
    # without it the dry run says so; nothing else may be refused
    unmounted = "is not on a CephFS mount" in proc.stderr
    assert proc.returncode == (2 if unmounted else 0), proc.stderr
    assert all("is not on a CephFS mount" in line for line in proc.stderr.splitlines() if line.strip())
    assert f"{len(cfg.cells())} cell(s) planned" in proc.stdout and "estimated total:" in proc.stdout
    assert not (tmp_path / "iobench-runs").exists()


def test_the_run_section_says_how_ranks_keep_step():
    run = parse_config(_raw()).cells()[0].run
    assert (run.sync, run.interconnect.name, run.allreduce_overlap) == ("allreduce", "ib-ndr-400", 0.67)
    raw = _raw()
    raw["run"] = {
        "sync": "barrier",
        "interconnect": {"name": "lab", "bandwidth": "10GB/s"},
        "allreduce_overlap": 0,
    }
    run = parse_config(raw).cells()[0].run
    assert (run.sync, run.interconnect.bandwidth_bytes_per_s, run.allreduce_overlap) == ("barrier", 10e9, 0.0)
    for bad, message in (
        ({"sync": "maybe"}, "run.sync='maybe': allowed values are allreduce, barrier, none"),
        ({"interconnect": "token-ring"}, "run.interconnect: interconnect 'token-ring': known ones are"),
        ({"allreduce_overlap": 1.5}, "run.allreduce_overlap=1.5: expected a share"),
    ):
        raw["run"] = bad
        with pytest.raises(ConfigError, match=re.escape(message)):
            parse_config(raw)


def test_the_run_section_says_how_long_a_cell_measures_at_least():
    run = parse_config(_raw()).cells()[0].run
    assert (run.min_measure.seconds, run.min_measure.steps) == (5.0, 50)
    raw = _raw()
    raw["run"] = {"min_measure": {"seconds": 0, "steps": 0}}
    assert parse_config(raw).cells()[0].run.min_measure.steps == 0
    for bad, message in (
        ({"min_measure": {"seconds": -1}}, "run.min_measure.seconds=-1: expected the least seconds"),
        (
            {"min_measure": {"steps": 2.5}},
            "run.min_measure.steps=2.5: expected the least steps a cell measures after its warm-up >= 0",
        ),
        ({"min_measure": {"minutes": 1}}, "run.min_measure.minutes: unknown key"),
    ):
        raw["run"] = bad
        with pytest.raises(ConfigError, match=re.escape(message)):
            parse_config(raw)


def test_exit_codes_tell_usage_from_a_failed_run(iobench, tmp_path):
    """2: something in the command to change (a failed run exits 1: tests/e2e/test_sweep.py and
    tests/reliability/test_resource_faults.py)."""
    proc = iobench("report", tmp_path / "nowhere")
    assert proc.returncode == 2 and "no cell results found" in proc.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**_raw(), "run": {"epochs": 0}}))
    proc = iobench("sweep", bad, "--dry-run")
    assert proc.returncode == 2 and "run.epochs=0" in proc.stderr
    proc = iobench(
        "recommend", "--accelerators", "1xH100", "--dataset-size", "1GB", "--results", tmp_path / "nowhere"
    )
    assert proc.returncode == 2 and "no such directory" in proc.stderr


def test_a_client_list_makes_one_tier_and_its_cells_per_client(tmp_path, monkeypatch):
    monkeypatch.setenv("IOBENCH_CACHE", str(tmp_path / "cache"))
    raw = {
        "dataset": {"synth": {"size": "1GB", "shard_size": "64MB"}},
        "tiers": [
            {
                "kind": "s3",
                "name": "rgw",
                "url": "s3://bucket/synth",
                "endpoint_url": "http://127.0.0.1:9",
                "client": ["s3fs", "minio", "obstore"],
            }
        ],
        "loaders": [{"workers": [2]}],
        "accelerators": [{"type": "h100"}],
    }
    cells = parse_config(raw).cells()
    assert [(c.cell_id, c.tier["client"]) for c in cells] == [
        ("rgw-s3fs-torch-w2-b64-h100x1-cold", "s3fs"),
        ("rgw-minio-torch-w2-b64-h100x1-cold", "minio"),
        ("rgw-obstore-torch-w2-b64-h100x1-cold", "obstore"),
    ]
    assert {c.tier["url"] for c in cells} == {"s3://bucket/synth"}  # the same bytes, read by each
    for clients, message in (
        (["s3fs", "s3fs"], r"tiers\[0\]: s3 tier: client=\['s3fs', 's3fs'\]: a list names each client once"),
        ([], r"tiers\[0\]: s3 tier: client=\[\]: a list names each client once"),
        (["s3fs", "boto9"], r"tiers\[0\].*boto9"),
    ):
        raw["tiers"][0]["client"] = clients
        with pytest.raises(ConfigError, match=message):
            parse_config(raw)
