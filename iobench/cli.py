"""The iobench command line. Heavy modules (torch, decoders) load only in the commands using them."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console
from rich.text import Text

from loaders.plugins import resolve_import

# piped output (CI logs, files) gets a wide table rather than rich's 80-column default (or the
# width COLUMNS asks for), and its lines are never broken mid-phrase: a reader's pager wraps them
_piped = not sys.stdout.isatty()
console = Console(
    highlight=False,
    width=160 if _piped and "COLUMNS" not in os.environ else None,
    soft_wrap=_piped,
)
err_console = Console(stderr=True, highlight=False)


def _function(where: str) -> Callable:
    """``"module:name"`` (module relative to this package) imported."""
    return resolve_import(where, what=f"the command's code {where!r}", package=__package__)


def _delegated(where: str) -> Callable[[argparse.Namespace], int]:
    """A subcommand whose code is ``where`` (``"module:name"``, imported when it runs, not when
    parsing): ``name(args, console) -> exit code``."""

    def run(args: argparse.Namespace) -> int:
        return _function(where)(args, console)

    return run


@dataclass(frozen=True)
class Subcommand:
    """A subcommand: where its arguments are added (its package's cli.py, imported to build the
    parser, so cheap to import) and where its code is (imported only when it runs), as
    ``"module:function"`` relative to this package."""

    name: str
    arguments: str
    run: str
    help: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class SubcommandGroup:
    name: str
    help: str
    dest: str  # the attribute that names the subcommand chosen
    commands: tuple[Subcommand, ...]


COMMANDS: tuple[Subcommand | SubcommandGroup, ...] = (
    Subcommand(
        "sweep",
        ".sweep.cli:add_sweep_arguments",
        ".sweep.cli:sweep_command",
        "run a sweep (no CONFIG: the embedded default on the local disk)",
    ),
    Subcommand(
        "diagnose",
        ".sweep.cli:add_sweep_arguments",
        ".sweep.cli:sweep_command",
        "a sweep with the differential ceilings (accelerator, prep from RAM, fetch from the tier) "
        "and the accelerator-capacity check in every cell",
    ),
    SubcommandGroup(
        "dataset",
        "make datasets",
        "dataset_command",
        (
            Subcommand(
                "synth",
                ".datasets.cli:add_synth_arguments",
                ".datasets.cli:synth_command",
                "synthesise ImageNet-like WebDataset shards",
            ),
            Subcommand(
                "pack",
                ".datasets.cli:add_pack_arguments",
                ".datasets.cli:pack_command",
                "pack a train/<class>/*.JPEG tree into shards",
            ),
            Subcommand(
                "objects",
                ".datasets.cli:add_objects_arguments",
                ".datasets.cli:objects_command",
                "add one object per sample (objects/NNNNNN.jpg + objects/index.json) to a shard dataset, "
                "for the objects layout (layout: objects)",
            ),
            Subcommand(
                "index",
                ".datasets.cli:add_index_arguments",
                ".datasets.cli:index_command",
                "(re)write the .idx index beside each tar shard (the index a part of a shard is read "
                "by when shards are fewer than readers, and DALI's reader)",
            ),
            Subcommand(
                "upload",
                ".datasets.cli:add_upload_arguments",
                ".tiers.cli:upload_command",  # putting a dataset on a tier needs the tiers, above datasets
                "upload a dataset to s3://bucket/prefix, rados://pool/prefix or a CephFS path (idempotent)",
                aliases=("stage",),  # its name before 0.2
            ),
        ),
    ),
    Subcommand(
        "checkpoint",
        ".checkpoint.cli:add_checkpoint_arguments",
        ".checkpoint.cli:checkpoint_command",
        "MLPerf Storage's checkpointing workload on a directory, S3 or RADOS: save and load duration "
        "and throughput, one process per rank (docs/checkpoints.md)",
    ),
    Subcommand(
        "lab",
        ".lab.cli:add_lab_arguments",
        ".lab.cli:lab_command",
        "a real single-node Ceph (S3 via radosgw, RADOS, CephFS) on 127.0.0.1",
    ),
    Subcommand(
        "report",
        ".report.cli:add_report_arguments",
        ".report.cli:report_command",
        "print the report of a run directory",
    ),
    Subcommand(
        "compare",
        ".report.cli:add_compare_arguments",
        ".report.cli:compare_command",
        "what changed between two run directories, cell by cell",
    ),
    Subcommand(
        "recommend",
        ".recommend.cli:add_recommend_arguments",
        ".recommend.cli:recommend_command",
        "what to buy: where a dataset should live and how to decode it, the answer first (feasible on "
        "the node, the highest AU, the cheapest change where none reaches the target), then every option",
    ),
    Subcommand(
        "inspect",
        ".inspect.cli:add_inspect_arguments",
        ".inspect.cli:inspect_command",
        "this host's CPUs, NUMA nodes, memory, NVMe/RAID links, file systems, NICs/RDMA and GPUs, "
        "and the pitfalls it sees",
    ),
    Subcommand(
        "calibrate",
        ".accelerators.cli:add_calibrate_arguments",
        ".accelerators.cli:calibrate_command",
        "time a real trainer's step alone on this host, for the emulated accelerator's host work",
    ),
    Subcommand(
        "probe",
        ".probe.cli:add_probe_arguments",
        ".probe.cli:probe_command",
        "run your own training command (after --) and say where it starves its accelerator: the loop's "
        "waits, the workers' time per sample, the step alone and the loader alone (--ceilings)",
    ),
    Subcommand(
        "monitor",
        ".monitor.cli:add_monitor_arguments",
        ".monitor.cli:monitor_command",
        "Prometheus metrics beside a running job (--pid) or a running sweep (--run-dir)",
    ),
)


def _add_commands(
    sub: argparse._SubParsersAction, commands: tuple[Subcommand | SubcommandGroup, ...]
) -> None:
    for c in commands:
        if isinstance(c, SubcommandGroup):
            group = sub.add_parser(c.name, help=c.help).add_subparsers(dest=c.dest, required=True)
            _add_commands(group, c.commands)
            continue
        parser = sub.add_parser(c.name, help=c.help, aliases=list(c.aliases))
        _function(c.arguments)(parser)
        parser.set_defaults(func=_delegated(c.run))


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    p = argparse.ArgumentParser(
        prog="iobench", description="Where does the input pipeline starve the accelerators?"
    )
    p.add_argument("--version", action="version", version=f"iobench {__version__}")
    _add_commands(p.add_subparsers(dest="command", required=True), COMMANDS)
    return p


# exit codes (README, "Exit codes"): 0 done; 1 the run failed (a cell failed, storage or network
# gave up, a disk full or read-only); 2 usage (a bad flag, config value or path, a missing extra);
# 130 interrupted; a sweep stopped by signal N: 128 + N
EXIT_FAILED = 1
EXIT_USAGE = 2


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = args.func(args)
        sys.stdout.flush()  # here, so that a reader that has gone is caught below
        return code
    except BrokenPipeError:
        # the reader closed the pipe (`iobench compare A B --json | head`): a normal end; later
        # writes, and the interpreter's last flush, go nowhere instead of failing again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130
    except ImportError as exc:
        # an optional extra that is not installed: its message carries the pip line
        err_console.print(Text.assemble(("error: ", "red"), str(exc)), soft_wrap=True)
        return EXIT_USAGE
    except (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
        # usage: a flag, a config value or a path to change (each error carries its explanation)
        err_console.print(Text.assemble(("error: ", "red"), str(exc)), soft_wrap=True)
        return EXIT_USAGE
    except OSError as exc:
        # the run failed: storage or network unreachable, a disk full or read-only, a timeout
        err_console.print(Text.assemble(("error: ", "red"), str(exc)), soft_wrap=True)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
