"""Judging a cell's outcome once its processes are gone: the summary it published, or a failed one
that says why (the sweep's reason for stopping it, the cell's last words, the OOM killer), published
in its place; a cell that is not ok keeps its output in its log (cell.log)."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path

from iobench.cell.ranks.distributed import first_rank_error
from iobench.host.atomic import atomic_write
from iobench.host.memory import oom_kills, usable_memory
from iobench.results.spec import CellSpec
from iobench.results.store import SUMMARY_NAME, publish_cell, read_summary
from iobench.results.summary import CellSummary
from iobench.sweep.supervise import Ended, RunningCellPaths
from iobench.tiers.faults import Cause, blame_out_of_memory, exit_status, explain, out_of_memory

LOG_NAME = "cell.log"  # a failed cell's output (its traceback) in its directory
LOG_MAX_BYTES = 2 << 20


class OomCount:
    """The host's count of OOM kills when made, to tell whether the kernel killed for memory since."""

    def __init__(self) -> None:
        self.before = oom_kills()

    def since(self) -> Cause | None:
        """The kills since, as a cause to blame; None when there were none (or no count to read)."""
        after = oom_kills()
        # a memory cgroup's count and the host's do not compare
        if not (self.before and after and after[1] == self.before[1]) or after[0] <= self.before[0]:
            return None
        return out_of_memory(after[0] - self.before[0], after[1], usable_memory().describe())


def cell_outcome(
    run_dir: Path, cell: CellSpec, ended: Ended, files: RunningCellPaths, *, started: float, oom: OomCount
) -> CellSummary:
    """The cell's summary, published in ``run_dir`` when it differs from what the cell published."""
    error = ended.stopped
    if error is None and ended.returncode not in (0, None):
        said = first_rank_error(files.scratch) or last_words(files.stderr.read_text(errors="replace"))
        error = explain(said or exit_status(ended.returncode), cell.tier)
    summary, rewrite = _published_or_failed(run_dir, cell, files.summary, started, error)
    if summary.status == "failed" and (cause := oom.since()) is not None:
        # no exit status (None) is a process that outlived SIGKILL, which the sweep stopped
        message = summary.error or (
            exit_status(ended.returncode)
            if ended.returncode is not None
            else "the cell's process outlived SIGKILL"
        )
        summary = replace(summary, error=blame_out_of_memory(message, ended.returncode, cause))
        rewrite = True
    if rewrite:
        publish_cell(run_dir, cell.cell_id, {SUMMARY_NAME: summary})
    if summary.status != "ok":
        _keep_log(run_dir / cell.cell_id / LOG_NAME, files.stderr, summary.error, ended.notes)
    return summary


def _published_or_failed(
    run_dir: Path, cell: CellSpec, summary_path: Path, started: float, error: str | None
) -> tuple[CellSummary, bool]:
    """(the summary, whether it must be published): the cell's own when this attempt published it
    and nothing contradicts it, else a failed one."""
    summary = read_summary(run_dir, cell.cell_id) if summary_path.exists() else None
    # a summary older than this attempt is an earlier attempt's
    fresh = summary is not None and summary_path.stat().st_mtime >= started
    if summary is None or not fresh or (error is not None and summary.status != "failed"):
        return CellSummary.failed(cell, error or "cell wrote no summary"), True
    return summary, False


def last_words(stderr: str) -> str | None:
    """What a cell's stderr says last; for torchrun, the root-cause rank, its host and exit code (a
    rank killed by a signal leaves no report of its own)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    marker = "Root Cause (first observed failure):"
    if marker not in lines:
        return lines[-1] if lines else None
    said: dict[str, str] = {}
    for line in lines[lines.index(marker) :]:
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("host", "rank", "exitcode"):
            said.setdefault(key.strip(), value.strip())
    return "torchrun: " + ", ".join(f"{k} {v}" for k, v in said.items())


def _keep_log(dest: Path, stderr_path: Path, error: str | None, notes: list[str]) -> None:
    """The failed cell's output (its traceback) and what the sweep saw, beside its summary."""
    try:
        size = stderr_path.stat().st_size
        with open(stderr_path, "rb") as f:
            if size > LOG_MAX_BYTES:
                f.seek(size - LOG_MAX_BYTES)
            text = f.read().decode(errors="replace")
    except OSError:
        size, text = 0, ""
    head = f"[the first {size - LOG_MAX_BYTES} bytes are left out]\n" if size > LOG_MAX_BYTES else ""
    parts = [f"--- the cell's output (stderr){' ' + head if head else ''}\n{text.rstrip()}"]
    parts += [f"--- iobench sweep: {note}" for note in notes]
    parts.append(f"--- the summary's error\n{error}")
    with contextlib.suppress(OSError), atomic_write(dest, "w") as f:
        f.write("\n".join(parts) + "\n")
