"""The lab's files: directory layout, ceph.conf, keyring, S3 keys and the sourceable env file.

Every option below comes from the feasibility run (notes/ceph.md §5); several are essential and
their comments say why. Nothing here starts a process.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shlex
import string
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

from iobench.host.cachedir import cache_dir

# Daemon names ($name in ceph.conf). Their pid files are run/<name>.pid.
MON, MGR, OSD, RGW, MDS, FUSE = "mon.a", "mgr.x", "osd.0", "client.rgw.x", "mds.a", "ceph-fuse"
# `iobench lab restart DAEMON` names them by kind; the order is the start order
SHORT = {"mon": MON, "mgr": MGR, "osd": OSD, "rgw": RGW, "mds": MDS, "fuse": FUSE}
# What each object store keeps when the OSD stops (measured with `lab down`/`up`, `lab restart osd`
# and `kill -9` of the OSD; tests/integration/test_lab.py and tests/reliability/test_daemon_faults.py)
STORE_KEEPS = {
    "memstore": (
        "memstore (objects in OSD RAM, saved to DIR/osd.0 only on a clean stop): `lab down`/`up` and "
        "`lab restart` keep every pool, bucket, key and file; an OSD that dies (kill -9, a crash, "
        "out of memory) loses everything written since its last clean stop. Use --objectstore "
        "bluestore for a lab you mean to break"
    ),
    "bluestore": (
        "bluestore (a sparse file, DIR/osd.0/block): keeps every pool, bucket, key and file across "
        "`lab down`/`up`, `lab restart` and an OSD killed with kill -9"
    ),
}
# Everything `up` creates inside DIR: only these are ever removed (a wrong --dir must not wipe data).
ENTRIES = (
    "ceph.conf", "keyring", "monmap", "env", "lab.json", "run", "log", "crash", "mnt",
    MON, MGR, OSD, RGW, MDS,
)  # fmt: skip
UNIX_PATH_MAX = 107  # sun_path is 108 bytes including the terminating NUL
DEFAULT_PORT = 7480
DEFAULT_MON_PORTS = (3300, 6789)
OBJECTSTORES = ("memstore", "bluestore")


@dataclass(frozen=True)
class LabSettings:
    """What a new lab is made with: `up`'s options, checked, with their defaults."""

    port: int = DEFAULT_PORT  # radosgw's S3 port
    mon_ports: tuple[int, int] = DEFAULT_MON_PORTS  # v2, v1
    with_mgr: bool = True
    objectstore: str = "memstore"
    memstore_bytes: int = 4 << 30
    bluestore_bytes: int = 20 << 30
    cephfs: bool = False
    auth: str = "cephx"

    def __post_init__(self) -> None:
        if self.objectstore not in OBJECTSTORES:
            raise ValueError(f"objectstore must be one of {OBJECTSTORES}, not {self.objectstore!r}")
        if self.auth not in ("cephx", "none"):
            raise ValueError(f"auth must be 'cephx' or 'none', not {self.auth!r}")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ports(self) -> dict[str, int]:
        """As lab.json records them."""
        return {"s3": self.port, "mon_v2": self.mon_ports[0], "mon_v1": self.mon_ports[1]}


@dataclass(frozen=True)
class LabPaths:
    """Paths inside one lab directory."""

    dir: Path

    @property
    def conf(self) -> Path:
        return self.dir / "ceph.conf"

    @property
    def keyring(self) -> Path:
        return self.dir / "keyring"

    @property
    def monmap(self) -> Path:
        return self.dir / "monmap"

    @property
    def run(self) -> Path:
        return self.dir / "run"

    @property
    def log(self) -> Path:
        return self.dir / "log"

    @property
    def env(self) -> Path:
        return self.dir / "env"

    @property
    def lab_json(self) -> Path:
        return self.dir / "lab.json"

    @property
    def mnt(self) -> Path:
        return self.dir / "mnt"

    def pidfile(self, name: str) -> Path:
        return self.run / f"{name}.pid"

    def logfile(self, name: str) -> Path:
        return self.log / f"{name}.log"

    def asok(self, name: str) -> Path:
        return self.run / f"{name}.asok"

    def looks_like_lab(self) -> bool:
        return self.conf.exists() or self.lab_json.exists()


def asok_too_long(layout: LabPaths) -> str | None:
    """A warning when the longest admin socket path would not fit in sun_path, else None."""
    longest = layout.asok(RGW)
    if len(os.fsencode(longest)) > UNIX_PATH_MAX:
        return (
            f"admin socket path {longest} is {len(os.fsencode(longest))} bytes, over the "
            f"{UNIX_PATH_MAX}-byte limit of a unix socket path: the daemons cannot create their admin "
            "sockets; choose a shorter --dir"
        )
    return None


def cephx_key() -> str:
    """A new cephx secret in Ceph's encoding: u16 type (1 = AES), utime created, u16 length, 16 bytes."""
    now = time.time()
    raw = struct.pack("<HIIH", 1, int(now), int((now % 1) * 1e9), 16) + secrets.token_bytes(16)
    return base64.b64encode(raw).decode()


# entity -> caps. The mon imports all of them (with caps) at mkfs, so no `ceph auth` calls later.
_CAPS: dict[str, dict[str, str]] = {
    "mon.": {"mon": "allow *"},
    "client.admin": {"mon": "allow *", "osd": "allow *", "mgr": "allow *", "mds": "allow *"},
    MGR: {"mon": "allow profile mgr", "osd": "allow *", "mds": "allow *"},
    OSD: {"mon": "allow profile osd", "mgr": "allow profile osd", "osd": "allow *"},
    RGW: {"mon": "allow rw", "osd": "allow rwx", "mgr": "allow rw"},
    MDS: {"mon": "allow profile mds", "mgr": "allow profile mds", "osd": "allow rwx", "mds": "allow"},
}


def render_keyring() -> str:
    out = []
    for entity, caps in _CAPS.items():
        out.append(f"[{entity}]\n\tkey = {cephx_key()}")
        out.extend(f'\tcaps {svc} = "{cap}"' for svc, cap in caps.items())
    return "\n".join(out) + "\n"


def s3_keys() -> tuple[str, str]:
    """A fresh (access key, secret key) pair in AWS's shapes: 20 upper-case alnum, 40 characters."""
    upper = string.ascii_uppercase + string.digits
    secret = string.ascii_letters + string.digits
    return "".join(secrets.choice(upper) for _ in range(20)), "".join(
        secrets.choice(secret) for _ in range(40)
    )


def render_conf(layout: LabPaths, fsid: str, settings: LabSettings) -> str:
    return _global_section(layout, fsid, settings) + _daemon_sections(layout, settings)


def _global_section(layout: LabPaths, fsid: str, settings: LabSettings) -> str:
    d = layout.dir
    v2, v1 = settings.mon_ports
    auth = settings.auth
    return f"""\
# written by `iobench lab up`; a throw-away single-node cluster on 127.0.0.1
[global]
fsid = {fsid}
mon initial members = a
mon host = [v2:127.0.0.1:{v2},v1:127.0.0.1:{v1}]
public network = 127.0.0.0/8
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind ipv6 = false
auth cluster required = {auth}
auth service required = {auth}
auth client required = {auth}
keyring = {layout.keyring}
# every runtime file stays inside the lab dir (defaults point to /var/run, /var/log, /var/lib)
run dir = {layout.run}
crash dir = {d}/crash
mon cluster log file = {layout.log}/cluster.log
# one OSD: replication 1, failure domain = OSD, few PGs, no autoscaler churn
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
osd crush chooseleaf type = 0
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon max pg per osd = 1000
mon allow pool delete = true
# health warnings expected on a throw-away cluster (the disk one fires at 30 % free by default)
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
mon warn on insecure global id reclaim = false
mon warn on insecure global id reclaim allowed = false

"""


def _daemon_sections(layout: LabPaths, settings: LabSettings) -> str:
    d = layout.dir
    # $name is a Ceph metavariable, expanded by each daemon.
    per_daemon = (
        f"pid file = {layout.run}/$name.pid\n"
        f"admin socket = {layout.run}/$name.asok\n"
        f"log file = {layout.log}/$name.log\n"
    )
    no_mgr = (
        ""
        if settings.with_mgr
        else "# no mgr on purpose: don't raise MGR_DOWN after the 120 s default grace\n"
        "mon mgr mkfs grace = 31536000\n"
    )
    return f"""\
[mon]
mon data = {d}/$name
# commit map changes after 0.1 s instead of 1 s: bring-up 2-3 s instead of 13 s
paxos propose interval = 0.1
{no_mgr}{per_daemon}
[mgr]
mgr data = {d}/$name
{per_daemon}
[osd]
osd data = {d}/$name
{per_daemon}osd objectstore = {settings.objectstore}
memstore device bytes = {settings.memstore_bytes}
# bluestore: sparse file osd.0/block created at mkfs. Never set "bluestore block path" to it:
# mkfs turns it into a self-referencing symlink ("(40) Too many levels of symbolic links").
bluestore block create = true
bluestore block size = {settings.bluestore_bytes}
bluestore fsck on mkfs = false
osd memory target = 1073741824
# Pacific's fast shutdown skips unmounting the store: memstore then loses every object on a stop
osd fast shutdown = false

[mds]
mds data = {d}/$name
{per_daemon}
[client.rgw.x]
# tcp_nodelay=1: without it a GET of an object under ~64 KB takes ~45 ms (Nagle vs delayed ACK)
rgw frontends = beast endpoint=127.0.0.1:{settings.port} tcp_nodelay=1
rgw data = {d}/$name
{per_daemon}rgw enable usage log = false
rgw enable ops log = false
# radosgw defaults to ms_mon_client_mode=secure, which needs cephx; allow crc too (auth = none)
ms mon client mode = secure crc
"""


def env_vars(*, conf: Path, endpoint: str, access_key: str, secret_key: str) -> dict[str, str]:
    """The variables boto3 (>= 1.28 reads AWS_ENDPOINT_URL), s3fs, the ceph CLI and iobench use."""
    return {
        "CEPH_CONF": str(conf),
        "AWS_ENDPOINT_URL": endpoint,
        "S3_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": access_key,
        "AWS_SECRET_ACCESS_KEY": secret_key,
        "AWS_DEFAULT_REGION": "us-east-1",
        # boto3 >= 1.36 flexible checksums: fine over http with RGW 16, but over https they become
        # aws-chunked trailers that RGW 16 does not know. when_required = the pre-1.36 behaviour.
        "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
        "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required",
    }


def render_env(variables: dict[str, str]) -> str:
    lines = ["# written by `iobench lab up`: source it (. DIR/env). Holds the S3 secret: keep it 0600."]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in variables.items()]
    return "\n".join(lines) + "\n"


def parse_env(text: str) -> dict[str, str]:
    """The inverse of render_env (``export K=V`` lines, shell-quoted values)."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("export ") and "=" in line:
            key, _, value = line[len("export ") :].partition("=")
            parts = shlex.split(value)
            out[key.strip()] = parts[0] if parts else ""
    return out


def write_private(path: Path, text: str) -> None:
    """Create ``path`` with mode 0600 from the start (never world-readable, not even briefly)."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o600)  # an existing tmp keeps its old mode under O_CREAT
    os.replace(tmp, path)


@dataclass
class LabInfo:
    """What a client needs; ``secret_key`` comes from DIR/env, never from lab.json."""

    dir: Path
    conf: Path
    env_file: Path
    endpoint: str
    access_key: str
    secret_key: str = field(repr=False)
    pids: dict[str, int]
    ports: dict[str, int]
    objectstore: str
    mount: Path | None
    ceph_version: str
    up_seconds: float

    @property
    def env(self) -> dict[str, str]:
        return read_env(self.dir)

    @classmethod
    def load(cls, lab_dir: str | os.PathLike[str]) -> LabInfo:
        layout = lab_paths(lab_dir)
        meta = json.loads(layout.lab_json.read_text())
        env = read_env(layout.dir)
        return cls(
            dir=layout.dir,
            conf=layout.conf,
            env_file=layout.env,
            endpoint=meta["endpoint"],
            access_key=env["AWS_ACCESS_KEY_ID"],
            secret_key=env["AWS_SECRET_ACCESS_KEY"],
            pids=meta["pids"],
            ports=meta["ports"],
            objectstore=meta["objectstore"],
            mount=Path(meta["mount"]) if meta.get("mount") else None,
            ceph_version=meta["ceph_version"],
            up_seconds=meta["up_seconds"],
        )


def default_lab_dir() -> Path:
    """``lab`` in iobench's cache directory (``$IOBENCH_CACHE``, else the XDG cache's ``iobench``)."""
    return cache_dir() / "lab"


def read_env(lab_dir: str | os.PathLike[str]) -> dict[str, str]:
    return parse_env((Path(lab_dir) / "env").read_text())


def lab_paths(lab_dir: str | os.PathLike[str] | None) -> LabPaths:
    """The lab in ``lab_dir`` (default: :func:`default_lab_dir`), its links and ``~`` resolved."""
    return LabPaths(Path(os.path.realpath(Path(lab_dir or default_lab_dir()).expanduser())))


def lab_meta(layout: LabPaths) -> dict:
    """DIR/lab.json, or {} when there is none (yet)."""
    try:
        return json.loads(layout.lab_json.read_text())
    except (OSError, ValueError):
        return {}
