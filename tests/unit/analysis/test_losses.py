"""Samples lost: the completed epochs' plans against what they delivered, said in one line."""

from __future__ import annotations

from iobench.analysis.losses import loss_line, sample_loss
from iobench.results.figures import EpochFigures, LoaderStats
from loaders import StageStats
from loaders.observe import Loss
from tests.helpers.summaries import epoch_figures, judge_of, metrics_of


def _epoch(n: int, samples: int, expected: int | None) -> EpochFigures:
    return epoch_figures(n, samples, expected_samples=expected)


REGION = Loss("s3://b/tiny/train-000000.tar", 40_000_000, 85_000_000, 436, 332, "zeroed blocks")


def test_the_worst_completed_epoch_is_said_with_where_its_samples_went():
    stats = LoaderStats(losses=(REGION, REGION), errors={"corrupt_sample": 2})
    epochs = [_epoch(0, 768, 768), _epoch(1, 332, 768), _epoch(2, 100, 768)]  # epoch 2 cut by max_steps
    loss = sample_loss(epochs, completed=2, stats=stats)
    assert (loss.lost, loss.expected, loss.epoch, loss.epoch_delivered) == (436, 1536, 1, 332)
    line = loss_line(loss)
    assert line.startswith("SAMPLES LOST: epoch 1 delivered 332 of 768 samples (436 lost; 436 of 1,536")
    assert (
        "436 samples (332-767) in s3://b/tiny/train-000000.tar bytes 40,000,000-85,000,000: zeroed blocks"
        in line
    )
    assert line.count("train-000000.tar") == 1 and "2 corrupt_sample" in line
    # the judge says it first, whatever it found
    from iobench.results.figures import StepRow

    rows = [StepRow(i, 0, False, 0.1 * i, 0.05, 0.0, 0.05, 0.1 * (i + 1), 8, 800) for i in range(10)]
    stats = StageStats(samples=80)
    stats.add_time("decode", 0.4, 0.4)
    verdict = judge_of(metrics_of(rows), stats, workers=1, cores=2, loss=loss)
    assert verdict.headline.startswith(f"{line}; prep-bound")


def test_no_loss_where_every_epoch_delivered_its_plan_or_none_is_known():
    stats = LoaderStats()
    assert sample_loss([_epoch(0, 768, 768), _epoch(1, 768, 768)], 2, stats) is None
    assert sample_loss([_epoch(0, 10, None)], 1, stats) is None  # a plan not known is not judged
