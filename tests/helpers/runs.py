"""Run settings tests share."""


def exact_epochs() -> dict:
    """run.min_measure that runs exactly run.epochs: for tests that count epochs, samples or keys (a
    real sweep extends a short window by epochs; docs/method.md, "The measured window"). A new
    mapping each time: a test may change the config it is part of."""
    return {"seconds": 0, "steps": 0}
