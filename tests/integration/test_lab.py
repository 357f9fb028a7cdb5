"""`iobench lab`: a real Ceph on 127.0.0.1 (one session lab; two short extra labs for failure and down)."""

from __future__ import annotations

import base64
import json
import os
import socket
import stat
import subprocess
import sys
import uuid

import pytest

from iobench import lab
from iobench.ceph.client import import_rados
from iobench.lab import bringup, conf, daemons
from tests.helpers.lab_fixture import ceph_missing, free_ports, lab_dir, require_ceph

# ------------------------------------------------------------------ without Ceph


def test_missing_ceph_names_the_packages(tmp_path, monkeypatch):
    monkeypatch.setattr(bringup.shutil, "which", lambda _name: None)
    with pytest.raises(lab.CephMissingError) as e:
        lab.up(tmp_path / "lab", cephfs=True)
    assert (
        "apt-get install -y --no-install-recommends ceph-mon ceph-osd ceph-mgr radosgw python3-rados"
        in str(e.value)
    )
    assert "ceph-mds ceph-fuse" in str(e.value)
    assert not (tmp_path / "lab").exists()


def test_env_file_round_trip_and_keys():
    access, secret = conf.s3_keys()
    assert len(access) == 20 and access.isalnum() and access.isupper() and len(secret) == 40
    assert conf.s3_keys() != (access, secret)
    env = conf.env_vars(
        conf=conf.Path("/x y/ceph.conf"), endpoint="http://127.0.0.1:1", access_key=access, secret_key=secret
    )
    assert conf.parse_env(conf.render_env(env)) == env
    raw = base64.b64decode(conf.cephx_key())
    assert len(raw) == 28 and raw[:2] == b"\x01\x00"


def test_stop_order_is_the_measured_one():
    names = ["mon.a", "osd.0", "ceph-fuse", "mgr.x", "client.rgw.x", "mds.a", "other"]
    assert daemons.stop_order(names) == [
        ["ceph-fuse"],
        ["client.rgw.x", "mds.a"],
        ["osd.0", "mgr.x"],
        ["mon.a"],
        ["other"],
    ]


def test_import_rados_explains_a_version_mismatch(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "rados", None)  # makes a plain `import rados` fail
    (tmp_path / "rados.cpython-39-x86_64-linux-gnu.so").write_bytes(b"")
    with pytest.raises(ImportError, match=r"none for this interpreter.*python3-rados"):
        import_rados(tmp_path)


def test_refuses_a_non_lab_directory(tmp_path):
    require_ceph()
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(lab.LabError, match="not empty"):
        lab.up(tmp_path, port=free_ports(1)[0])
    assert (tmp_path / "precious.txt").read_text() == "keep me"


# ------------------------------------------------------------------ the session lab


def test_env_file_drives_boto3(ceph_lab, monkeypatch):
    import boto3

    assert stat.S_IMODE(os.stat(ceph_lab.env_file).st_mode) == 0o600
    env = lab.read_env(ceph_lab.dir)
    assert env["AWS_ENDPOINT_URL"] == env["S3_ENDPOINT_URL"] == ceph_lab.endpoint
    assert env["AWS_DEFAULT_REGION"] == "us-east-1" and env["CEPH_CONF"] == str(ceph_lab.conf)
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    s3 = boto3.client("s3")  # everything from the environment, as after `. DIR/env`
    bucket = f"iobench-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    body = os.urandom(300_000)
    s3.put_object(Bucket=bucket, Key="a/b.bin", Body=body)
    assert s3.get_object(Bucket=bucket, Key="a/b.bin")["Body"].read() == body
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["a/b.bin"]


def test_lab_json_is_complete_and_holds_no_secret(ceph_lab):
    text = (ceph_lab.dir / "lab.json").read_text()
    meta = json.loads(text)
    assert ceph_lab.secret_key not in text and "secret" not in text.lower()
    assert meta["endpoint"] == ceph_lab.endpoint and meta["conf"] == str(ceph_lab.conf)
    assert {"started_at", "objectstore", "ceph_version", "pids", "ports"} <= meta.keys()
    assert meta["ports"]["s3"] != 7480 and meta["ports"]["mon_v2"] != 3300  # never the user's lab ports
    assert stat.S_IMODE(os.stat(ceph_lab.dir / "keyring").st_mode) == 0o600


def test_librados_read_write(ceph_lab):
    rados = import_rados()
    cluster = rados.Rados(conffile=str(ceph_lab.conf))
    cluster.connect(timeout=30)
    try:
        pool = "iobench-test"
        if not cluster.pool_exists(pool):
            cluster.create_pool(pool)
            cmd = {"prefix": "osd pool application enable", "pool": pool, "app": "iobench"}
            assert cluster.mon_command(json.dumps(cmd), b"")[0] == 0
        with cluster.open_ioctx(pool) as io:
            data = os.urandom(1 << 20)
            io.write_full("obj", data)
            assert io.read("obj", length=len(data)) == data
    finally:
        cluster.shutdown()


def test_second_up_on_a_live_lab_is_refused(ceph_lab):
    with pytest.raises(lab.LabError, match="already running") as e:
        lab.up(ceph_lab.dir, port=free_ports(1)[0])
    assert f"iobench lab down --dir {ceph_lab.dir}" in str(e.value)
    assert lab.status(ceph_lab.dir)["running"]  # and nothing was touched


def test_up_refuses_taken_ports(ceph_lab, tmp_path):
    with pytest.raises(lab.LabError, match="already in use"):
        lab.up(lab_dir(tmp_path), port=ceph_lab.ports["s3"], mon_ports=tuple(free_ports(2)))
    with pytest.raises(lab.LabError, match="mon v2 port"):
        lab.up(
            lab_dir(tmp_path), port=free_ports(1)[0], mon_ports=(ceph_lab.ports["mon_v2"], free_ports(1)[0])
        )


def test_status_reports_health_and_daemons(ceph_lab):
    st = lab.status(ceph_lab.dir)
    assert st["running"] and st["endpoint"] == ceph_lab.endpoint
    assert st["health"] in ("HEALTH_OK", "HEALTH_WARN"), st["health_checks"]
    assert {"mon.a", "osd.0", "client.rgw.x"} <= st["daemons"].keys()
    assert all(d["alive"] and d["rss_bytes"] > 0 for d in st["daemons"].values())
    assert all(d["state"] == "up" and d["log"].startswith(str(ceph_lab.dir)) for d in st["daemons"].values())
    assert st["complete"] and st["objectstore"] == "memstore" and "clean stop" in st["keeps"]


def test_cephfs_mount(ceph_lab):
    if ceph_lab.mount is None:
        meta = json.loads((ceph_lab.dir / "lab.json").read_text())
        if not meta["cephfs"]:
            ceph_missing(f"CephFS is not installed: {lab.install_hint(cephfs=True)}")
        pytest.skip(f"CephFS is up but not mounted here: {meta['mount_note']}")
    path = ceph_lab.mount / f"t-{uuid.uuid4().hex[:8]}"
    data = os.urandom(1 << 20)
    with open(path, "wb") as f:
        f.write(data)
        os.fsync(f.fileno())
    assert path.read_bytes() == data
    assert daemons.mounted(ceph_lab.mount)


# ------------------------------------------------------------------ extra labs: failure and down


def test_failed_up_stops_what_it_started(own_lab_dir, monkeypatch):
    port = free_ports(1)[0]
    with socket.socket() as squatter:  # radosgw cannot bind its port: a real daemon failure
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        real_port_free = bringup.port_free
        monkeypatch.setattr(bringup, "port_free", lambda p: p == port or real_port_free(p))
        d = own_lab_dir
        with pytest.raises(lab.LabError) as e:
            lab.up(d, port=port, mon_ports=tuple(free_ports(2)), with_mgr=False, timeout=30)
    assert e.value.daemon == "client.rgw.x"
    assert str(e.value.log).startswith(str(d / "log")) and str(e.value.log) in str(e.value)
    assert "last lines of" in str(e.value)
    started = daemons.recorded_pids(conf.LabPaths(d), None)
    assert not daemons.live_daemons(conf.LabPaths(d)), started
    assert not (d / "lab.json").exists() and not (d / "env").exists()


def test_down_stops_exactly_our_processes(own_lab_dir):
    d = own_lab_dir
    v2, v1, s3 = free_ports(3)
    info = lab.up(d, port=s3, mon_ports=(v2, v1), with_mgr=False, cephfs=False)
    # an unrelated process that looks like ceph, recorded in our run dir as if its pid was reused
    decoy = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "ceph-osd", "-c", "/elsewhere/ceph.conf"]
    )
    try:
        (d / "run" / "osd.9.pid").write_text(str(decoy.pid))
        res = lab.down(d)
        assert res["stopped"]["osd.9"] == "not running"
        assert all(res["stopped"][n] == "stopped" for n in info.pids), res
        assert not any(daemons.alive(p) for p in info.pids.values())
        assert decoy.poll() is None  # never signalled
        assert not lab.status(d)["running"]
        lab.purge(d)
        assert not d.exists()
    finally:
        decoy.kill()
        decoy.wait()


# ------------------------------------------------------------------ break and mend (a bluestore lab)


def _stage(info) -> dict:
    """An S3 object, a RADOS object and (when mounted) a CephFS file, written through the lab."""
    import boto3

    tag = uuid.uuid4().hex[:8]
    env = info.env
    s3 = boto3.client(
        "s3",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )
    body = os.urandom(100_000)
    s3.create_bucket(Bucket=f"keep-{tag}")
    s3.put_object(Bucket=f"keep-{tag}", Key="k", Body=body)
    rados = import_rados()
    cluster = rados.Rados(conffile=str(info.conf), conf={"rados_osd_op_timeout": "30"})
    cluster.connect()
    try:
        cluster.create_pool(f"keep-{tag}")
        with cluster.open_ioctx(f"keep-{tag}") as io:
            io.write_full("o", body)
    finally:
        cluster.shutdown()
    if info.mount is not None:
        with open(info.mount / f"keep-{tag}", "wb") as f:
            f.write(body)
            os.fsync(f.fileno())
        # fsync on CephFS flushes the data, not the size: ceph-fuse keeps that in its caps until it
        # releases them (measured: the MDS said size 0 until a later event made the client flush;
        # a ceph-fuse killed first, under load, left the file empty). A clean remount releases them.
        lab.restart(info.dir, "fuse")
    return {"tag": tag, "body": body, "keys": (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"])}


def _kept(info, staged: dict) -> list[str]:
    """What of ``staged`` the lab no longer serves (read back with the keys it was written with)."""
    import boto3

    tag, body, (access, secret) = staged["tag"], staged["body"], staged["keys"]
    lost = []
    s3 = boto3.client(
        "s3",
        endpoint_url=info.env["AWS_ENDPOINT_URL"],
        aws_access_key_id=access,
        aws_secret_access_key=secret,
        region_name="us-east-1",
    )
    try:
        if s3.get_object(Bucket=f"keep-{tag}", Key="k")["Body"].read() != body:
            lost.append("S3 object (bytes differ)")
    except Exception as exc:
        lost.append(f"S3 object: {exc}")
    rados = import_rados()
    cluster = rados.Rados(conffile=str(info.conf), conf={"rados_osd_op_timeout": "30"})
    cluster.connect()
    try:
        with cluster.open_ioctx(f"keep-{tag}") as io:
            if io.read("o", len(body) + 1) != body:
                lost.append("RADOS object (bytes differ)")
    except Exception as exc:
        lost.append(f"RADOS object: {exc}")
    finally:
        cluster.shutdown()
    if info.mount is not None:
        path = info.mount / f"keep-{tag}"
        if not path.exists() or path.read_bytes() != body:
            lost.append("CephFS file")
    return lost


def test_status_tells_the_truth_and_restart_mends_each_daemon(lab_to_break, iobench):
    """kill -9 of each daemon: `lab status` says HEALTH_ERR (the mon's own map still calls a killed
    OSD up for up to 15 min), names the daemon down with its pid and log, exits 1; `lab restart
    DAEMON` brings it back with the cluster: same S3 keys, buckets, pools and files."""
    import signal

    info = lab_to_break
    staged = _stage(info)
    layout = conf.LabPaths(info.dir)
    names = ["osd", "rgw", "mon"] + (["mds", "fuse"] if info.mount is not None else [])
    took = {}
    for short in names:
        name = conf.SHORT[short]
        pid = daemons.live_daemons(layout)[name]
        os.kill(pid, signal.SIGKILL)
        while daemons.alive(pid):
            pass
        st = lab.status(info.dir)
        assert st["health"] == "HEALTH_ERR", (short, st)
        assert st["daemons"][name]["state"] == "down" and st["daemons"][name]["pid"] == pid
        assert st["daemons"][name]["log"] == str(layout.logfile(name))
        assert f"DAEMON_DOWN {name}" in st["health_checks"] and not st["complete"]
        shown = iobench("lab", "status", "--dir", info.dir)
        assert (
            shown.returncode == 1
            and "HEALTH_ERR" in shown.stdout
            and f"iobench lab restart {short}" in shown.stdout
        )
        restarted = iobench("lab", "restart", short, "--dir", info.dir)
        assert restarted.returncode == 0, restarted.stderr
        assert f"restarted {name} (was not running)" in restarted.stdout
        took[short] = restarted.stdout.rsplit(" in ", 1)[-1].strip()
        st = lab.status(info.dir)
        assert st["complete"] and st["health"] in ("HEALTH_OK", "HEALTH_WARN"), (short, st["health_checks"])
    assert _kept(info, staged) == []
    print(f"figures: kill -9 then `lab restart`: {took}; nothing lost (S3 object, RADOS object, CephFS file)")


def test_down_then_up_brings_the_same_cluster_back(lab_to_break, iobench):
    info = lab_to_break
    staged = _stage(info)
    fsid = json.loads((info.dir / "lab.json").read_text())["fsid"]
    stopped = iobench("lab", "down", "--dir", info.dir)
    assert stopped.returncode == 0 and "the cluster's data is kept" in stopped.stdout, stopped.stdout
    assert not lab.status(info.dir)["running"] and (info.dir / "osd.0" / "block").exists()
    came = iobench(
        "lab", "up", "--dir", info.dir, "--port", free_ports(1)[0]
    )  # a new port is reported, not used
    assert came.returncode == 0, came.stderr
    assert "the same cluster" in came.stderr and "port=" in came.stderr and "is ignored" in came.stderr
    assert "bluestore" in came.stderr  # which store, and what it keeps
    back = lab.LabInfo.load(info.dir)
    assert json.loads((info.dir / "lab.json").read_text())["fsid"] == fsid
    assert back.endpoint == info.endpoint and back.env["AWS_SECRET_ACCESS_KEY"] == staged["keys"][1]
    assert _kept(back, staged) == []
    again = lab.restart(info.dir)  # all of them: down, then up
    assert set(again["restarted"]) >= {"mon.a", "osd.0", "client.rgw.x"}
    assert _kept(lab.LabInfo.load(info.dir), staged) == []


def test_a_memstore_lab_keeps_its_data_across_a_clean_down_and_up(own_lab_dir):
    """memstore saves its objects to DIR/osd.0 when the OSD stops cleanly (osd fast shutdown =
    false): `down` then `up` keep them. (A killed memstore OSD loses them: conf.STORE_KEEPS.)"""
    d = own_lab_dir
    v2, v1, s3 = free_ports(3)
    info = lab.up(d, port=s3, mon_ports=(v2, v1), with_mgr=False, cephfs=False, memstore_bytes=1 << 30)
    try:
        staged = _stage(info)
        lab.down(d)
        back = lab.up(d)
        assert back.objectstore == "memstore" and _kept(back, staged) == []
    finally:
        lab.purge(d)
