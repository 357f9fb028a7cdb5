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

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from loaders.options import Option, OptionError, check_options

if TYPE_CHECKING:
    from loaders.config import LoaderConfig
    from loaders.contract import Loader

ENTRY_POINT_GROUP = "iobench.loaders"
LoaderFactory = Callable[["LoaderConfig"], "Loader"]


@dataclass(frozen=True)
class Backend:
    """One loader backend: how to build it and the options it accepts in ``LoaderConfig.options``."""

    name: str
    target: str | LoaderFactory  # "module:attribute" (imported on first use) or the factory
    options: Mapping[str, Option] = field(default_factory=dict)
    install_hint: str = ""
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
        if callable(self.target):
            return self.target
        module_name, _, attr = self.target.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
        except ImportError as exc:
            raise ImportError(
                f"the {self.name!r} loader needs an optional dependency: {self.install_hint} ({exc})"
            ) from exc
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj

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
_BUILTIN: dict[str, Backend] = {
    "torch": Backend(
        "torch",
        "loaders.backends.torch_loader:ShardLoader",
        _TORCH,
        "pip install torch",
        undecoded=True,
        checks_itself=True,
    ),
    "nodes": Backend(
        "nodes",
        "loaders.backends.nodes_loader:NodesLoader",
        {
            "method": Option(
                str,
                default="thread",
                choices=("thread", "process"),
                help="the mapper's pool: threads (decoders release the GIL) or processes",
            ),
        },
        "pip install 'iobench[torchdata]'",
        undecoded=True,
        checks_itself=True,
        reader_threads="method",
    ),
    "threads": Backend(
        "threads",
        "loaders.backends.thread_loader:ThreadLoader",
        {},
        "pip install torch",
        undecoded=True,
        checks_itself=True,
        reader_threads="always",
    ),
    "dali": Backend(
        "dali",
        "loaders.backends.dali:DaliLoader",
        {
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
        "pip install 'iobench[dali]'  (or: pip install nvidia-dali-cuda130)",
        checks_itself=True,
        reader_threads="always",
    ),
}
_REGISTERED: dict[str, Backend] = {}


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
    _REGISTERED[name] = Backend(name, factory, dict(declared), install_hint, undecoded)


def _entry_points() -> dict[str, Any]:
    # read on every lookup: a plugin installed after import still shows up
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available_loaders() -> list[str]:
    """Every name make_loader accepts: built-ins (their dependency missing included), registered
    ones and entry points."""
    return sorted(set(_BUILTIN) | set(_REGISTERED) | set(_entry_points()))


def backend(name: str) -> Backend:
    """The backend called ``name``; ValueError lists the known names."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name in _BUILTIN:
        return _BUILTIN[name]
    ep = _entry_points().get(name)
    if ep is None:
        raise ValueError(f"loader {name!r}: known loaders are {', '.join(available_loaders())}")
    try:
        factory = ep.load()
    except ImportError as exc:
        raise ImportError(
            f"loader {name!r} (entry point {ep.value!r} in group {ENTRY_POINT_GROUP!r}) could not be "
            f"loaded: {exc}"
        ) from exc
    if not callable(factory):
        raise TypeError(f"loader {name!r}: entry point {ep.value!r} is not a factory (not callable)")
    found = Backend(name, factory, dict(getattr(factory, "options", {})))
    _REGISTERED[name] = found
    return found


def undecoded_loaders() -> list[str]:
    """The built-in and registered backends that can read without decoding."""
    return sorted(n for n, b in {**_BUILTIN, **_REGISTERED}.items() if b.undecoded)


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
