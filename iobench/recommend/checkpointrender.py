"""The checkpoint sizing in words (terminal) and as JSON, every figure with its source."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from rich.console import Console

from iobench.host.units import format_bytes

from .checkpoint import (
    DEFAULT_OVERHEAD,
    CheckpointSizing,
    Sourced,
    measured_rates,
    parse_duration,
    size_checkpoints,
    state_of,
    write_rate,
)


def add_checkpoint_sizing_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("checkpoints (docs/checkpoints.md): the write rate and the place they need")
    g.add_argument(
        "--checkpoint-model",
        metavar="NAME",
        help="llama3-8b, llama3-70b, llama3-405b or llama3-1t (MLPerf Storage's sizes)",
    )
    g.add_argument(
        "--checkpoint-params", metavar="N", help="parameters, e.g. 70B: x 14 bytes (mixed-precision Adam)"
    )
    g.add_argument("--checkpoint-size", metavar="SIZE", help="bytes per checkpoint, e.g. 912GB")
    g.add_argument("--checkpoint-every", metavar="DURATION", help="how often the job saves, e.g. 30min")
    g.add_argument(
        "--checkpoint-overhead",
        type=float,
        default=100 * DEFAULT_OVERHEAD,
        metavar="PERCENT",
        help="share of time the saves may take (default 1)",
    )
    g.add_argument(
        "--checkpoint-rate", action="append", default=[], metavar="NAME=RATE|FIO_JSON",
        help="a tier's write rate per node, e.g. nvme=12GB/s or shared=fio-write.json (repeatable); `local` names node-local NVMe",
    )  # fmt: skip


def wanted(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "checkpoint_every", None))


def sizing_of(
    args: argparse.Namespace, accelerators: int, per_node: int, per_node_source: str
) -> CheckpointSizing:
    rates: dict[str, Sourced] = {}
    for item in args.checkpoint_rate:
        name, eq, value = item.partition("=")
        if not eq:
            raise ValueError(
                f"--checkpoint-rate {item!r}: expected NAME=RATE or NAME=FIO_JSON, e.g. local=6GB/s"
            )
        rates[name] = write_rate(value)
    if getattr(args, "results", None):
        shared, local = measured_rates(args.results)
        rates.update(shared)
        if local is not None and "local" not in rates:
            rates["local"] = local
    return size_checkpoints(
        state_of(args.checkpoint_model, args.checkpoint_params, args.checkpoint_size),
        Sourced(parse_duration(args.checkpoint_every), f"given: --checkpoint-every {args.checkpoint_every}"),
        Sourced(
            args.checkpoint_overhead / 100, f"given: --checkpoint-overhead {args.checkpoint_overhead:g} %"
        ),
        accelerators,
        Sourced(float(per_node), per_node_source),
        rates,
        local="local" if "local" in rates else None,
    )


def _gbs(x: float) -> str:
    return f"{x / 1e9:.2f} GB/s"


def render_checkpoints(s: CheckpointSizing, console: Console) -> None:
    say = lambda line: console.print(line, markup=False, highlight=False)  # noqa: E731
    say("\ncheckpoints")
    say(
        f"  state: {s.state.value / 1e9:,.0f} GB ({format_bytes(s.state.value)}) per checkpoint ({s.state.source})"
    )
    say(
        f"  every {s.interval_s.value:g} s ({s.interval_s.source}); accepted: {100 * s.overhead.value:g} % of the time ({s.overhead.source})"
    )
    say(
        f"  {s.accelerators} accelerators on {s.nodes} node(s), {s.per_node.value:g} per node ({s.per_node.source}): {format_bytes(s.bytes_per_node)} per node"
    )
    say(
        f"  a blocking save within {100 * s.overhead.value:g} % needs {_gbs(s.sync_rate_per_node)} per node, "
        f"{_gbs(s.sync_rate_cluster)} for the cluster (bytes per node / ({s.overhead.value:g}/(1-{s.overhead.value:g}) x interval))"
    )
    say(
        f"  a background write needs {_gbs(s.async_rate_per_node)} per node, {_gbs(s.async_rate_cluster)} for the cluster "
        f"(done within the interval), and blocks for the copy: {s.bytes_per_node / s.copy_rate_per_node.value:.1f} s "
        f"at {_gbs(s.copy_rate_per_node.value)} per node ({s.copy_rate_per_node.source})"
    )
    for name, rate in s.rates.items():
        restore = s.restore_s(name)
        say(
            f"  {name}: writes {_gbs(rate.value)} per node ({rate.source}); a restore reading at that rate takes "
            f"{restore:.0f} s (a read rate equal to the write rate assumed)"
        )
    if any(r.source.startswith("measured:") for r in s.rates.values()):
        say(
            "  (a rate measured by a sweep is the measuring host's: a lab on loopback or another kind of "
            "device does not carry over to the target; give the target's with --checkpoint-rate)"
        )
    for p in s.placements:
        mark = "meets" if p.meets else "misses"
        say(
            f"    {p.name}: {100 * (p.overhead or 0):.2f} % of the time, {mark} {100 * s.overhead.value:g} % ({p.note})"
        )
    say(f"  where: {s.answer}")


def checkpoint_json(s: CheckpointSizing) -> dict[str, Any]:
    out = dataclasses.asdict(s)
    out["sync_rate_cluster"], out["async_rate_cluster"] = s.sync_rate_cluster, s.async_rate_cluster
    return out
