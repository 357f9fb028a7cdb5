"""The object clients an S3 store can be read with, by name: each a file of this package meeting
the protocol of ``base.py``, so the reader's retries, deadline and counters (objectstore.py) and
the layers above it (throttle, cache) wrap every client alike.

    s3fs               fsspec's S3 filesystem (aiobotocore); a core dependency
    minio              the MinIO Python SDK (urllib3)
    s3torchconnector   the AWS Common Runtime client of s3torchconnector (its wheel
                       s3torchconnectorclient; no torch needed)
    obstore            Rust's object_store (tokio, reqwest)
    s3dlio             the AWS SDK for Rust, tuned for AI/ML (MLPerf Storage's client)

Importing this package imports no client: the table names each one's module, and whether a client
is installed is asked of the import system without importing it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from loaders.storage.clients.base import ClientSettings, ObjectClient

ClientName = Literal["s3fs", "minio", "s3torchconnector", "obstore", "s3dlio"]
INSTALL_HINT = "pip install 'iobench[s3clients]'"


@dataclass(frozen=True)
class ClientEntry:
    target: str  # "module:Class" of loaders.storage.clients
    needs: str  # the import the client needs: installed when it can be found
    package: str  # what to install
    takes_keys: bool = True  # credentials passed in (storage options' key/secret), not only found
    takes_profile: bool = True  # a profile named per client, not only AWS_PROFILE
    # survives a fork after its first request (a DataLoader worker forked then): see base.ForkGuard
    fork_safe: bool = True


CLIENTS: dict[str, ClientEntry] = {
    "s3fs": ClientEntry("fsspec_client:FsspecClient", "s3fs", "s3fs"),
    "minio": ClientEntry("minio_client:MinioClient", "minio", "minio"),
    "s3torchconnector": ClientEntry(
        "s3torch_client:S3TorchClient", "s3torchconnectorclient", "s3torchconnectorclient", takes_keys=False
    ),
    "obstore": ClientEntry("obstore_client:ObstoreClient", "obstore", "obstore", fork_safe=False),
    "s3dlio": ClientEntry(
        "s3dlio_client:S3dlioClient",
        "s3dlio",
        "s3dlio",
        takes_keys=False,
        takes_profile=False,
        fork_safe=False,
    ),
}
CLIENT_NAMES: tuple[str, ...] = tuple(CLIENTS)
# the clients by the client table of docs/benchmarks.md (benchmarks/bench_s3_clients.py against the
# lab: the geometric mean of each one's ratios to the best over GETs of 100 KB objects and 8 and
# 64 MiB ranges, medians of interleaved rounds), best first: "auto" is the first of these that is installed, takes
# what the settings give and survives a fork (the torch DataLoader forks its workers by default)
MEASURED_ORDER: tuple[str, ...] = ("obstore", "s3dlio", "minio", "s3torchconnector", "s3fs")
DEFAULT_CLIENT = "auto"
CLIENT_CHOICES: tuple[str, ...] = ("auto", *CLIENT_NAMES)


def installed_clients() -> list[str]:
    """The clients that can be imported here, in the table's order (none is imported)."""
    return [name for name, entry in CLIENTS.items() if importlib.util.find_spec(entry.needs) is not None]


def resolve_client(name: str, *, keys: bool = False, profile: bool = False) -> str:
    """``name`` checked, "auto" made the best measured client installed that survives a fork and
    takes credentials passed in (``keys``) or a profile of its own (``profile``) where they are
    given; ValueError says what is allowed, ImportError how to install a client that is not."""
    if name not in CLIENT_CHOICES:
        raise ValueError(f"client={name!r}: allowed values are {', '.join(CLIENT_CHOICES)}")
    here = installed_clients()
    if name == "auto":
        return next(  # s3fs is a core dependency, and takes both
            n
            for n in MEASURED_ORDER
            if n in here
            and CLIENTS[n].fork_safe
            and (CLIENTS[n].takes_keys or not keys)
            and (CLIENTS[n].takes_profile or not profile)
        )
    if name not in here:
        raise ImportError(
            f"client={name!r} is not installed: {INSTALL_HINT} (or pip install {CLIENTS[name].package})"
        )
    return name


def survives_fork(name: str) -> bool:
    """Whether client ``name`` still works in a process forked after it made a request (base.ForkGuard)."""
    return CLIENTS[resolve_client(name)].fork_safe


def reads_before_fork(name: str) -> str:
    """The client a process reads with before it forks readers that read with ``name``: ``name``
    where its runtime survives a fork, else s3fs (a core dependency), so that the forked readers'
    requests, the measured ones, are the first ``name`` makes in their process (base.ForkGuard)."""
    return name if survives_fork(name) else "s3fs"


def client_class(name: str) -> type[ObjectClient]:
    """The class of client ``name`` (imported now)."""
    module, _, cls = CLIENTS[resolve_client(name)].target.partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


def make_client(name: str, settings: ClientSettings) -> ObjectClient:
    """Client ``name`` of the endpoint ``settings`` names."""
    return client_class(name)(settings)


def describe_client(name: str) -> dict[str, Any]:
    """What a cell records of client ``name``: its name, version, and the retries it makes by
    itself that the reader cannot turn off (none for most)."""
    cls = client_class(name)
    return {
        "client": cls.name,
        "client_version": importlib.metadata.version(CLIENTS[cls.name].package),
        "client_own_retries": cls.own_retries or "none: turned off, every retry is the reader's",
    }
