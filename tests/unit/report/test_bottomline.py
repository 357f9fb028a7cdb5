"""The bottom line: at most six lines, and the next limit named by the cell's own figures."""

from __future__ import annotations

from dataclasses import replace

from iobench.report.bottomline import bottom_line, predicted_gain
from iobench.results.figures import Ceiling, Ceilings, Window
from tests.helpers.summaries import cell_spec, failed_summary, ok_summary


def _prep_bound(trainer_alone: float, ceilings: Ceilings | None = None):
    s = ok_summary("disk-torch-w2", 500.0)
    assert s.metrics is not None and s.verdict is not None
    return replace(
        s,
        metrics=replace(s.metrics, trainer_alone_samples_per_s=trainer_alone),
        verdict=replace(s.verdict, action="add loader cores"),
        ceilings=ceilings,
    )


def test_the_next_limit_is_the_trainer_alone_of_the_cells_metrics_not_a_slower_accelerator_ceiling():
    # a ceiling run under load can time the accelerator far slower than the trainer's fastest steps;
    # the bottom line names one trainer-alone figure, the one the cell's metrics and verdict use
    ceilings = Ceilings(
        accelerator=Ceiling("accelerator", 1_200.0, 1280, 1.07),
        fetch=Ceiling("fetch", 4_500.0, 12_000, 2.7),
        prep=Ceiling("prep", 480.0, 5_000, 10.4),
    )
    gain = predicted_gain(_prep_bound(6_900.0, ceilings))
    assert gain is not None and "the fetch ceiling at 4,500/s" in gain
    gain = predicted_gain(_prep_bound(3_000.0, ceilings))
    assert gain is not None and "the trainer alone at 3,000/s" in gain
    assert "1,200" not in gain


def test_without_ceilings_the_trainer_alone_is_the_next_limit():
    s = _prep_bound(2_000.0)
    assert s.metrics is not None and s.metrics.device_busy_s is not None
    au = min(1.0, 2_000.0 * s.metrics.device_busy_s / s.metrics.samples)
    assert predicted_gain(s) == f"the next limit is the trainer alone at 2,000/s: AU up to {au:.2f}"


def test_at_most_six_lines_however_many_tiers_and_the_failed_cells_are_counted():
    cells = [
        ok_summary(f"t{i}-torch-w2", 100.0 * (i + 1), cell=cell_spec(f"t{i}-torch-w2", tier=f"t{i}"))
        for i in range(7)
    ]
    best = replace(cells[-1], verdict=replace(cells[-1].verdict, action="add loader cores"))
    lines = bottom_line([*cells[:-1], best, failed_summary("t9-torch-w2")])
    assert len(lines) == 6
    assert "and 4 more tier/loader pairs" in lines[2]
    assert lines[3].startswith("tier differential (torch): the AU moves with the tier (t0 0.10")
    assert lines[4].startswith("largest gain (t6-torch-w2): add loader cores")
    assert lines[5] == "1 cell(s) failed"


def test_tiers_whose_au_does_not_move_beyond_the_intervals_say_the_host_binds():
    def on(tier: str, rate: float, rel_ci: float):
        s = ok_summary(f"{tier}-torch-w2", rate, cell=cell_spec(f"{tier}-torch-w2", tier=tier))
        window = Window(
            steps=50, seconds=10.0, epochs=1, added_epochs=0, samples_per_s_rel_ci=rel_ci, met=True
        )
        return replace(s, window=replace(window, au_rel_ci=rel_ci))

    same = [on("local", 500.0, 0.05), on("s3", 480.0, 0.05), on("ceph", 490.0, 0.05)]
    line = next(x for x in bottom_line(same) if x.startswith("tier differential"))
    assert "does not move with the tier" in line and "the host binds, not the storage" in line
    apart = [on("local", 500.0, 0.02), on("s3", 200.0, 0.02)]
    line = next(x for x in bottom_line(apart) if x.startswith("tier differential"))
    assert "moves with the tier" in line and "local reads fastest" in line
    assert not any(x.startswith("tier differential") for x in bottom_line(same[:1]))


def test_a_trainer_alone_timed_on_a_busy_host_names_no_next_limit():
    s = _prep_bound(2_000.0)
    busy = replace(s, metrics=replace(s.metrics, trainer_alone_quiet=False, trainer_alone_others_cores=1.1))
    assert predicted_gain(busy) == (
        "the next limit is not judged: the trainer alone was timed while other processes used 1.1 cores"
    )


def test_no_measured_cell_says_so():
    assert bottom_line([failed_summary("a"), failed_summary("b")]) == [
        "no cell measured anything (2 failed: see each cell's error above)"
    ]
    assert bottom_line([]) == []


def test_a_next_limit_beside_a_trainer_timed_on_a_busy_host_says_the_trainer_may_bind_first():
    ceilings = Ceilings(
        fetch=Ceiling("fetch", 4_500.0, 12_000, 2.7), prep=Ceiling("prep", 480.0, 5_000, 10.4)
    )
    s = _prep_bound(2_000.0, ceilings)
    busy = replace(s, metrics=replace(s.metrics, trainer_alone_quiet=False, trainer_alone_others_cores=1.1))
    gain = predicted_gain(busy)
    assert gain.startswith("the next limit is the fetch ceiling at 4,500/s") and "may bind first" in gain
