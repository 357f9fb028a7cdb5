"""The object clients an S3 store can be read with, by name: entries of the one plugin registry
(loaders/plugins.py), each naming a class of this package that meets the protocol of ``base.py``,
so the reader's retries, deadline and counters (objectstore.py) and the layers above it (throttle,
cache) wrap every client alike.

    s3fs               fsspec's S3 filesystem (aiobotocore); a core dependency
    minio              the MinIO Python SDK (urllib3)
    s3torchconnector   the AWS Common Runtime client of s3torchconnector (its wheel
                       s3torchconnectorclient; no torch needed)
    obstore            Rust's object_store (tokio, reqwest)
    s3dlio             the AWS SDK for Rust, tuned for AI/ML (MLPerf Storage's client)

Importing this package imports no client: an entry names its class by import string and states
what ``auto`` weighs (installed, fork safety, credentials, measured rank) without importing it.
Another package's client is one more entry: ``CLIENTS.register(ClientEntry("mine",
"mypkg.client:MyClient"))``, or one under the ``iobench.clients`` entry-point group naming the
class or a ``ClientEntry``::

    [project.entry-points."iobench.clients"]
    mine = "mypkg.client:ENTRY"
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, NewType, cast, get_args

from loaders.plugins import Entry, Registry

if TYPE_CHECKING:
    from loaders.storage.clients.base import ClientSettings, ForkGuard, ObjectClient

ENTRY_POINT_GROUP = "iobench.clients"
# the built-in clients; a test holds this list and the registry's built-ins equal
ClientName = Literal["s3fs", "minio", "s3torchconnector", "obstore", "s3dlio"]
# another package's client, by name: made only by resolve_client, once the registry knows the name
PluginClientName = NewType("PluginClientName", str)
ResolvedClient = ClientName | PluginClientName  # a client that can read, by name
ClientChoice = ResolvedClient | Literal["auto"]  # what a tier or a SourceSpec asks for
DEFAULT_CLIENT: ClientChoice = "auto"
CLIENT_NAMES: tuple[ClientName, ...] = get_args(ClientName)
INSTALL_HINT = "pip install 'iobench[s3clients]'"
OWN_RETRIES_OFF = "none: turned off, every retry is the reader's"


@dataclass(frozen=True)
class ClientEntry(Entry):
    """One object client: its class (``target``: "module:Class", imported on first use, or the
    class), how to install it, and what ``auto`` weighs without importing it."""

    needs: str = ""  # the module it imports: installed when that can be found (default: the target's)
    package: str = ""  # the distribution whose version a cell records (default: the target's package)
    takes_keys: bool = True  # credentials passed in (storage options' key/secret), not only found
    takes_profile: bool = True  # a profile named per client, not only AWS_PROFILE
    # its requests work in a process forked after it made its first (a DataLoader worker forked
    # then); if not, base.ForkGuard makes such a process fail at once instead of hang
    fork_safe: bool = True
    # its place in the client table of docs/benchmarks.md (benchmarks/bench_s3_clients.py against
    # the lab: the geometric mean of its ratios to the best over GETs of 100 KB objects and 8 and
    # 64 MiB ranges, medians of interleaved rounds), 1 the best; None: not measured, never auto's
    measured_rank: int | None = None

    def _module(self) -> str:
        target = self.target
        return target.partition(":")[0] if isinstance(target, str) else target.__module__

    def installed(self) -> bool:
        """Whether the client can be imported here (nothing is imported to tell)."""
        return importlib.util.find_spec(self.needs or self._module()) is not None

    def load(self) -> type[ObjectClient]:
        """The client's class (imported now)."""
        return CLIENTS.load(self.name)

    def version(self) -> str:
        """The installed version of what the client is ("unknown" where no distribution says it)."""
        try:
            return importlib.metadata.version(self.package or self._module().partition(".")[0])
        except importlib.metadata.PackageNotFoundError:
            return "unknown"


def _hint(package: str) -> str:
    return f"{INSTALL_HINT} (or pip install {package})"


_BUILTIN = (
    ClientEntry(
        "s3fs",
        "loaders.storage.clients.fsspec_client:FsspecClient",
        "pip install s3fs",
        needs="s3fs",
        package="s3fs",
        measured_rank=5,
    ),
    ClientEntry(
        "minio",
        "loaders.storage.clients.minio_client:MinioClient",
        _hint("minio"),
        needs="minio",
        package="minio",
        measured_rank=3,
    ),
    ClientEntry(
        "s3torchconnector",
        "loaders.storage.clients.s3torch_client:S3TorchClient",
        _hint("s3torchconnectorclient"),
        needs="s3torchconnectorclient",
        package="s3torchconnectorclient",
        takes_keys=False,
        measured_rank=4,
    ),
    ClientEntry(
        "obstore",
        "loaders.storage.clients.obstore_client:ObstoreClient",
        _hint("obstore"),
        needs="obstore",
        package="obstore",
        fork_safe=False,
        measured_rank=1,
    ),
    ClientEntry(
        "s3dlio",
        "loaders.storage.clients.s3dlio_client:S3dlioClient",
        _hint("s3dlio"),
        needs="s3dlio",
        package="s3dlio",
        takes_keys=False,
        takes_profile=False,
        fork_safe=False,
        measured_rank=2,
    ),
)


def _client_class(obj: Any) -> bool:
    from loaders.storage.clients.base import ObjectClient

    return isinstance(obj, type) and issubclass(obj, ObjectClient)


CLIENTS: Registry[ClientEntry] = Registry(
    "client",
    _BUILTIN,
    group=ENTRY_POINT_GROUP,
    # an entry point names the class (the facts at their defaults) or a ClientEntry stating them
    from_entry_point=lambda name, obj: (
        replace(obj, name=name) if isinstance(obj, ClientEntry) else ClientEntry(name, obj)
    ),
    accepts=_client_class,
    must_be="an ObjectClient subclass",
)


def client_names() -> list[str]:
    """Every client a tier may name: the built-ins, registered ones, then entry points."""
    known = list(CLIENTS.known())
    return known + [n for n in CLIENTS.names() if n not in known]


def installed_clients() -> list[ResolvedClient]:
    """The clients that can be imported here, in the order of :func:`client_names` (none is imported)."""
    known = CLIENTS.known()
    return [cast(ResolvedClient, n) for n in client_names() if n not in known or known[n].installed()]


def resolve_client(name: str, *, keys: bool = False, profile: bool = False) -> ResolvedClient:
    """``name`` checked against the registry, "auto" made the best measured client installed that
    survives a fork and takes credentials passed in (``keys``) or a profile of its own
    (``profile``) where they are given; ValueError says what is allowed, ImportError how to install
    a client that is not."""
    here = installed_clients()
    if name == "auto":
        ranked = sorted(
            ((rank, e) for e in CLIENTS.known().values() if (rank := e.measured_rank)), key=lambda r: r[0]
        )
        return next(  # s3fs is a core dependency, and takes both
            cast(ClientName, e.name)
            for _, e in ranked
            if e.name in here
            and e.fork_safe
            and (e.takes_keys or not keys)
            and (e.takes_profile or not profile)
        )
    try:
        entry = CLIENTS.entry(name)
    except ValueError:
        raise ValueError(
            f"client={name!r}: allowed values are {', '.join(['auto', *client_names()])}"
        ) from None
    if name not in here:
        raise ImportError(f"client={name!r} is not installed: {entry.install_hint}")
    return cast(ClientName, name) if name in CLIENT_NAMES else PluginClientName(name)


def survives_fork(name: str) -> bool:
    """Whether client ``name`` still works in a process forked after it made a request (base.ForkGuard)."""
    return CLIENTS.entry(resolve_client(name)).fork_safe


def reads_before_fork(name: str) -> ResolvedClient:
    """The client a process reads with before it forks readers that read with ``name``: ``name``
    where its runtime survives a fork, else s3fs (a core dependency), so that the forked readers'
    requests, the measured ones, are the first ``name`` makes in their process (base.ForkGuard)."""
    client = resolve_client(name)
    return client if CLIENTS.entry(client).fork_safe else "s3fs"


_FORK_GUARDS: dict[str, ForkGuard] = {}  # per client that does not survive a fork: the process it started in


def make_client(name: str, settings: ClientSettings) -> ObjectClient:
    """Client ``name`` of the endpoint ``settings`` names; one that does not survive a fork fails at
    once in a process forked after it was made (base.ForkGuard)."""
    entry = CLIENTS.entry(resolve_client(name))
    if not entry.fork_safe:
        from loaders.storage.clients.base import ForkGuard

        survivors = [e.name for e in CLIENTS.known().values() if e.fork_safe]
        _FORK_GUARDS.setdefault(entry.name, ForkGuard(entry.name, survivors)).check()
    return entry.load()(settings)


def describe_client(name: str) -> dict[str, Any]:
    """What a tier's description records of client ``name`` (users read it in the cell's
    manifest): its name, version, and the retries it makes by itself that the reader cannot turn
    off (none for most)."""
    entry = CLIENTS.entry(resolve_client(name))
    return {
        "client": entry.name,
        "client_version": entry.version(),
        "client_own_retries": entry.load().own_retries or OWN_RETRIES_OFF,
    }
