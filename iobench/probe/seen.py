"""What the probe saw of a job, in words: why nothing could be measured (no Python process loaded the
hooks, no torch, no DataLoader iterated, no batch taken), and what it could not split."""

from __future__ import annotations

from .command import JobCommand
from .measure import ProbedRank
from .reader import Job


def _exit(code: int | None) -> str:
    if code is None:
        return "the job is still running"
    if code < 0:
        return f"the job was ended by signal {-code}"
    return f"the job exited with code {code}"


def what_was_seen(job: Job, code: int | None, command: JobCommand) -> str:
    """Why no window was measured, naming what the probe did see."""
    ended = _exit(code)
    if job.hook_failures:
        pid, trace = next(iter(job.hook_failures.items()))
        last = trace.strip().splitlines()[-1] if trace.strip() else "no message"
        return f"the probe's hooks failed to load in process {pid} ({last}); {ended}"
    if not job.hellos:
        return (
            f"no Python process of `{' '.join(command.argv)}` loaded the probe (did something clear PYTHONPATH, or "
            f"start Python with -E, -I or -S?); {ended}"
        )
    programs = sorted({" ".join(h.argv[:2]) or "python" for h in job.hellos.values()})
    processes = f"{len(job.hellos)} Python process(es) ran ({'; '.join(programs[:4])})"
    if not job.torch:
        return f"{processes} but none imported torch.utils.data; {ended}"
    if not job.loaders:
        return (
            f"{processes}, torch {next(iter(job.torch.values())).version} was imported, but no "
            f"torch.utils.data.DataLoader (nor a DALI iterator) was iterated; {ended}"
        )
    loaders = ", ".join(sorted({str(r.info.get("dataset")) for r in job.loaders.values()}))
    steps = sum(len(s) for s in job.steps.values())
    if steps == 0:
        return f"{processes}; a loader of {loaders} was iterated but handed the loop no batch; {ended}"
    return f"{processes}; the loop took {steps} batch(es) of {loaders}, too few for a step with its end known; {ended}"


def notes_for(job: Job, runs: tuple[ProbedRank, ...]) -> list[str]:
    """What the figures leave out, said once."""
    notes = []
    for run in runs:
        if run.info.get("iterable") and run.info.get("kind") == "torch":
            notes.append(
                "an IterableDataset has no per-index hook: its iterator is timed per batch (its samples' reading "
                "and decoding together, split only into CPU, waiting for a core and blocked); what it does ahead "
                "in threads of its own is not seen"
            )
            break
    if any(r.info.get("kind") == "dali" for r in runs):
        notes.append("DALI: the loop's waits are timed; its pipeline's stages run in DALI's threads, unseen")
    for pid, error in job.errors:
        notes.append(
            f"a hook failed in process {pid} ({error.where}: {error.message}); the job ran without it"
        )
    other = [t for t in job.steps if t not in {r.tag for r in runs}]
    if other:
        notes.append(
            f"{len(other)} other loader stream(s) (an evaluation loader, say) were seen and left out; time the loop "
            "spent in them counts in the main loader's steps"
        )
    return notes
