"""Loader backends by name, with the options each declares. Importing this module imports no torch
and no backend: a sweep file is checked against the declared options before anything heavy loads.

Built-in backends are import strings, imported on first use, so an optional dependency (torchdata,
DALI) costs nothing until it is asked for and then fails with an install hint. Third-party
backends register in code (:func:`register_loader`) or through the ``iobench.loaders`` entry-point
group, naming a factory ``config -> Loader``; the factory may carry its declared options as an
``options`` attribute (a mapping of name -> :class:`loaders.options.Option`)::

    [project.entry-points."iobench.loaders"]
    mine = "mypkg.loader:make_my_loader"
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from loaders.options import Option, OptionError, check_options
from loaders.plugins import Entry, Registry

if TYPE_CHECKING:
    from loaders.config import LoaderConfig
    from loaders.contract import Loader

ENTRY_POINT_GROUP = "iobench.loaders"
LoaderFactory = Callable[["LoaderConfig"], "Loader"]


@dataclass(frozen=True)
class Backend(Entry):
    """One loader backend: how to build it (``target``: "module:attribute", imported on first use,
    or the factory) and the options it accepts in ``LoaderConfig.options``."""

    options: Mapping[str, Option] = field(default_factory=dict)
    # can deliver batches of byte lengths without decoding (LoaderConfig.decode=False); a backend
    # that decodes inside its own graph (DALI) cannot
    undecoded: bool = False
    # the factory checks what it is given itself (the built-ins: loaders.backends.BaseLoader, which
    # training code also builds directly), so make_loader does not check it a second time
    checks_itself: bool = False
    # its readers are threads of the training process even with workers (their CPU is in that
    # process's CPU): "always", "never", or the name of the option whose value "process" says not
    reader_threads: str = "never"

    def readers_in_process(self, options: Mapping[str, Any], workers: int) -> bool:
        """Whether the readers run in the training process: without workers every backend reads
        there; with workers, as ``reader_threads`` says."""
        if workers == 0 or self.reader_threads == "always":
            return True
        if self.reader_threads == "never":
            return False
        return options.get(self.reader_threads, "thread") != "process"

    def factory(self) -> LoaderFactory:
        return BACKENDS.load(self.name) if isinstance(self.target, str) else self.target

    def check(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """``options`` checked against the declared ones, defaults filled in (OptionError if wrong)."""
        return check_options(f"loader {self.name!r}", self.options, options)

    def checked(self, config: LoaderConfig) -> LoaderConfig:
        """``config`` with its options checked and completed (:meth:`check`); ValueError when it asks
        not to decode (``decode=False``) and this backend always decodes."""
        if not config.pipeline.decode and not self.undecoded:
            raise ValueError(
                f"loader {self.name!r} always decodes: decode=False needs {', '.join(undecoded_loaders())}"
            )
        return replace(config, options=self.check(config.options))


_PIN = Option(
    (bool, type(None)), default=None, help="pin batches in page-locked memory; default: when CUDA is present"
)
# DataLoader's own keywords that make sense in a sweep file; worker_init_fn and generator are code,
# so they are ShardLoader keyword arguments only (loaders.backends.torch_loader)
_TORCH = {
    "pin_memory": _PIN,
    "persistent_workers": Option(
        bool, default=True, help="keep the workers across epochs: a new epoch costs no fork"
    ),
    "prefetch_next_epoch": Option(
        bool,
        default=True,
        help="persistent workers go on to the next epoch as soon as they finish one, so its first "
        "batches are ready at the boundary (after the last epoch read, a few batches per worker are "
        "read for nothing; loader.stats counts a batch when its epoch is read)",
    ),
    "multiprocessing_context": Option(
        (str, type(None)),
        default=None,
        choices=("fork", "forkserver", "spawn", None),
        help="how workers start (default: Python's default for the platform)",
    ),
    "timeout": Option((int, float), default=0, help="seconds to wait for a worker's batch (0: no limit)"),
    "pin_memory_device": Option(str, default="", help="the device to pin for (default: the current one)"),
    "in_order": Option(bool, default=True, help="deliver batches in the order the workers were asked"),
}
_BUILTIN = (
    Backend(
        name="torch",
        target="loaders.backends.torch_loader:ShardLoader",
        options=_TORCH,
        install_hint="pip install torch",
        undecoded=True,
        checks_itself=True,
    ),
    Backend(
        name="nodes",
        target="loaders.backends.nodes_loader:NodesLoader",
        options={
            "method": Option(
                str,
                default="thread",
                choices=("thread", "process"),
                help="the mapper's pool: threads (decoders release the GIL) or processes",
            ),
        },
        install_hint="pip install 'iobench[torchdata]'",
        undecoded=True,
        checks_itself=True,
        reader_threads="method",
    ),
    Backend(
        name="threads",
        target="loaders.backends.thread_loader:ThreadLoader",
        install_hint="pip install torch",
        undecoded=True,
        checks_itself=True,
        reader_threads="always",
    ),
    Backend(
        name="dali",
        target="loaders.backends.dali:DaliLoader",
        options={
            "mode": Option(
                str,
                default="auto",
                choices=("auto", "reader", "external", "dali-s3"),
                help="how encoded bytes reach the graph: DALI's reader, our fetcher, or DALI's own S3 reader",
            ),
            "fetchers": Option(
                (int, type(None)), default=None, help="external mode: reader threads (default: workers)"
            ),
            "device_id": Option(
                (int, type(None)), default=None, help="GPU index (default: from device, else 0)"
            ),
        },
        install_hint="pip install 'iobench[dali]'  (or: pip install nvidia-dali-cuda130)",
        checks_itself=True,
        reader_threads="always",
    ),
)
BACKENDS: Registry[Backend] = Registry(
    "loader",
    _BUILTIN,
    group=ENTRY_POINT_GROUP,
    # a factory may carry its declared options as an ``options`` attribute
    from_entry_point=lambda name, factory: Backend(
        name=name, target=factory, options=dict(getattr(factory, "options", {}))
    ),
    accepts=callable,
    must_be="a loader factory (callable)",
)


def register_loader(
    name: str,
    factory: LoaderFactory,
    *,
    options: Mapping[str, Option] | None = None,
    install_hint: str = "",
    undecoded: bool = False,
) -> None:
    """Add (or replace) a backend: ``factory(config)`` returns an object meeting ``loaders.Loader``;
    ``options`` declares what it accepts in ``config.options`` (default: its ``options`` attribute);
    ``undecoded``: it honours ``config.decode=False``."""
    if not callable(factory):
        raise TypeError(f"loader factory for {name!r} is not callable")
    declared = options if options is not None else getattr(factory, "options", {})
    BACKENDS.register(
        Backend(
            name=name, target=factory, options=dict(declared), install_hint=install_hint, undecoded=undecoded
        )
    )


def available_loaders() -> list[str]:
    """Every name make_loader accepts: built-ins (their dependency missing included), registered
    ones and entry points."""
    return BACKENDS.names()


def backend(name: str) -> Backend:
    """The backend called ``name``; ValueError lists the known names."""
    return BACKENDS.entry(name)


def undecoded_loaders() -> list[str]:
    """The built-in and registered backends that can read without decoding."""
    return sorted(n for n, b in BACKENDS.known().items() if b.undecoded)


def make_loader(name: str, config: LoaderConfig) -> Loader:
    """Build the backend called ``name`` ("torch", "threads", "nodes", "dali", or a registered one), its
    ``config.options`` checked once against the ones it declares and completed with their defaults
    (:meth:`Backend.checked`)."""
    chosen = backend(name)
    return chosen.factory()(config if chosen.checks_itself else chosen.checked(config))


__all__ = [
    "ENTRY_POINT_GROUP",
    "Backend",
    "Option",
    "OptionError",
    "available_loaders",
    "backend",
    "make_loader",
    "register_loader",
]
