"""A sweep file that reproduces the probed job's loader with iobench's own, so ``iobench sweep`` can say
where its data should live: the job's batch size, workers and prefetch; its samples (its own files
packed into shards when the probe found where they live, else synthetic ones of ImageNet's size);
its store as its workers met it (a throttled tier whose bandwidth is what the job's readers got
while they were blocked), beside the local disk; and its step as the demand (the step alone, or
its step with the data in hand), emulated with the job's own trainer CPU per step as its host work
(``host_work: "<N>ms x<threads>"``), so that a job whose trainer and readers share the cores shares
them in the sweep too.

The job's decode and transforms are its own: iobench's loader decodes and augments JPEGs its own
way, and adds the CPU the job's readers spent per sample beyond that (``decode_cpu_ms``: the job's
CPU per sample less this host's decode and augment rate at the job's sample size), so that a
sample costs the readers what it cost the job's.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import yaml

from iobench.analysis import decoderate
from iobench.datasets.samplesize import KIB, MAX_SAMPLE_KIB, MIN_SAMPLE_KIB
from iobench.host.units import format_bytes

from .measure import ProbedRank
from .outcome import Outcome

# a store the workers waited on for less than this share of a sample's time is not reproduced
BLOCKED_SHARE = 0.10


def consumer_rate(run: ProbedRank) -> float | None:
    """Samples/s the job's step takes with its data in hand (measure.py, ProbedRank.feed)."""
    feed = run.feed()
    return feed[0] if feed else None


def store_bandwidth(run: ProbedRank) -> float | None:
    """Bytes/s the job's readers got from their store, together, while blocked on it; None when
    the store cost them little."""
    w = run.work
    if w is None or w.samples == 0 or w.get_ms <= 0 or w.blocked_ms < BLOCKED_SHARE * w.get_ms:
        return None
    return w.readers * w.bytes_per_sample / (w.blocked_ms / 1000.0)


def extra_cpu_ms(run: ProbedRank) -> tuple[float, decoderate.DecodeRate] | None:
    """CPU ms per sample the job's readers spent beyond what iobench's decode and augment take here
    at the job's sample size, with the rate it was told by; None where the job's readers were not
    seen or spent no more."""
    w = run.work
    if w is None or w.samples == 0:
        return None
    rate = decoderate.resolve()
    extra = w.cpu_ms - rate.ms_per_sample(w.bytes_per_sample or None)
    return (round(extra, 2), rate) if extra >= 0.01 else None


def synth_sample_bytes(run: ProbedRank) -> int | None:
    """The mean sample of a synthetic stand-in for the job's samples: the bytes its readers read per
    sample, within what the generator can make (56-180 KiB); None where the readers were not seen."""
    w = run.work
    if w is None or not w.bytes_per_sample:
        return None
    return round(min(max(w.bytes_per_sample / KIB, MIN_SAMPLE_KIB), MAX_SAMPLE_KIB) * KIB)


def trainer_work(run: ProbedRank) -> tuple[float, int] | None:
    """The job's trainer CPU per step (ms) and the threads it ran on: its step alone's (--ceilings:
    the step itself, which an emulated trainer does beside its device time), else its process's CPU
    from one call to the next in the window, less its readers' where they ran in it (no workers);
    None where not timed."""
    alone = run.step_alone
    if alone is not None and alone.cpu_s and alone.step_s > 0:
        return round(1000.0 * alone.cpu_s, 2), max(1, round(alone.cpu_s / alone.step_s))
    timed = [(s, step_cpu) for s in run.window if (step_cpu := s.cpu_s) is not None]
    if not timed:
        return None
    cpu = statistics.median(step_cpu for _, step_cpu in timed)
    w = run.work
    if run.workers == 0 and w is not None and w.batches:
        cpu -= (w.get_cpu_s + w.collate_cpu_s) / w.batches
    host = statistics.median(s.host_s for s, _ in timed)
    if cpu <= 0:
        return None
    return round(1000.0 * cpu, 2), max(1, round(cpu / host)) if host > 0 else 1


def one_epoch(info: dict, ranks: int, most: int = 500) -> int:
    """The steps of one epoch of the job's loader on each rank (at most ``most``)."""
    length, batch = info.get("length"), int(info.get("batch_size") or 1)
    return min(most, max(1, int(length) // (batch * ranks))) if length else most


def sweep_config(outcome: Outcome, dataset_dir: Path) -> dict:
    run = outcome.runs[0]
    info = run.info
    root = info.get("root")
    tiers: list[dict] = [{"kind": "local", "name": "local"}]
    bandwidth = store_bandwidth(run)
    if bandwidth is not None:
        tiers.append(
            {
                "kind": "throttled",
                "name": "as-measured",
                "inner": {"kind": "local", "path": str(dataset_dir)},
                "bandwidth": f"{bandwidth / 1e6:.3f}MB/s",
            }
        )
    if root:
        dataset: dict = {"path": str(dataset_dir)}
    else:
        dataset = {"synth": {"samples": int(info.get("length") or 2048)}}
        if (size := synth_sample_bytes(run)) is not None:
            dataset["synth"]["sample_size"] = f"{size}B"
    loader: dict[str, object] = {  # one loader entry of the sweep file, as YAML writes it
        "kind": "torch",
        "workers": [int(info.get("workers") or 0)],
        "batch_size": [int(info.get("batch_size") or 1)],
    }
    if info.get("workers"):
        loader["prefetch"] = int(info.get("prefetch_factor") or 2)
    extra = extra_cpu_ms(run)
    if extra is not None:
        loader["decode_cpu_ms"] = extra[0]
    rate = consumer_rate(run)
    work = trainer_work(run)
    world = max(1, len(outcome.runs))
    return {
        "dataset": dataset,
        "tiers": tiers,
        "loaders": [loader],
        "accelerators": [
            {
                "kind": "emulated",
                "type": "custom",
                "samples_per_s": round(rate or 1000.0, 1),
                "host_work": f"{work[0]:g}ms x{work[1]}" if work else "none",
            }
        ],
        "run": {
            "cache": ["warm"],
            "warmup_steps": "auto",
            **({"ranks_per_node": world} if world > 1 else {}),
            # a store as slow as the job's: one epoch's steps at most (an epoch over a throttled tier
            # is long, and a sweep adds epochs to a short window)
            **({"max_steps": one_epoch(info, world)} if bandwidth is not None else {}),
        },
    }


def header(outcome: Outcome, dataset_dir: Path, out: Path) -> str:
    run = outcome.runs[0]
    info, work = run.info, run.work
    lines = [
        f"The loader of `{' '.join(outcome.command)}` as `iobench probe` measured it, for iobench's own loader:",
        f"a {info.get('kind', 'torch')} loader of {info.get('dataset')}, batch {info.get('batch_size')}, "
        f"{info.get('workers')} worker(s), prefetch {info.get('prefetch_factor')}.",
    ]
    if work is not None:
        lines.append(
            f"Per sample the job's readers read {format_bytes(work.bytes_per_sample)}, spent {work.cpu_ms:.1f} ms of "
            f"CPU in the dataset and {work.blocked_ms:.1f} ms blocked."
        )
    bandwidth = store_bandwidth(run)
    if bandwidth is not None:
        lines.append(
            f"Tier as-measured: the job's store as its workers met it ({format_bytes(bandwidth)}/s together while "
            "they waited on it), beside the local disk."
        )
    rate = consumer_rate(run)
    trainer = trainer_work(run)
    if rate is not None:
        how = "alone (--ceilings)" if run.step_alone is not None else "with its data in hand"
        host = (
            f"with the job's trainer CPU, {trainer[0]:g} ms per step on {trainer[1]} thread(s), as its host work"
            if trainer
            else "without host work (the trainer's CPU was not timed)"
        )
        lines.append(f"Demand: the job's step took {rate:,.0f} samples/s {how}; emulated {host}.")
    lines.append(
        "Not carried: the job's model (a sleep of its step's time stands for it, its host CPU burned beside),"
    )
    lines.append(
        "its own transforms beyond their CPU per sample, and its store beyond a bandwidth (latency, request"
    )
    lines.append(
        "sizes): the sweep's rate differs from the job's by what those change; its verdict should not."
    )
    lines.append(
        "iobench's loader decodes and augments JPEGs its own way (simplejpeg, a random resized crop)"
    )
    extra = extra_cpu_ms(run)
    if extra is not None and work is not None:
        (ms, decode_rate), size = extra, work.bytes_per_sample or None
        lines.append(
            f"and spends decode_cpu_ms: {ms:g} more CPU ms per sample (in its decode stage: the probe times the job's dataset whole), the job's {work.cpu_ms:.2f} ms less "
            f"{decode_rate.ms_per_sample(size):.2f} ms of its own decode and augment here"
        )
        lines.append(f"({decode_rate.describe(size)}).")
    else:
        lines.append("and adds nothing: the job's readers spent no more CPU per sample than it does here.")
    root = info.get("root")
    if root:
        lines += ["Run it:", f"  iobench dataset pack {root} --out {dataset_dir}    (once)"]
    else:
        size = synth_sample_bytes(run)
        lines.append(
            "The probe did not find where the job's files live: the dataset is synthetic ImageNet-like JPEGs"
        )
        if size is None or work is None:
            lines.append("of ImageNet's size (about 110 KiB a sample).")
        else:
            said = f"of {format_bytes(size)} a sample, where the job read {format_bytes(work.bytes_per_sample)} a sample"
            clamped = abs(size - work.bytes_per_sample) > 0.01 * work.bytes_per_sample
            lines.append(said + (" (the nearest the generator makes: 56-180 KiB)." if clamped else "."))
        lines.append("Run it:")
    lines.append(f"  iobench sweep {out} --out <run directory>")
    return "".join(f"# {line}\n" for line in lines)


def write_sweep_file(outcome: Outcome, out: Path, dataset_dir: Path) -> Path:
    text = header(outcome, dataset_dir, out) + yaml.safe_dump(
        sweep_config(outcome, dataset_dir), sort_keys=False, default_flow_style=None
    )
    out.write_text(text)
    return out
