"""Run settings tests share."""


def exact_epochs() -> dict:
    """run.min_measure that runs exactly run.epochs: for tests that count epochs, samples or keys (a
    real sweep extends a short window by epochs; docs/method.md, "The measured window"). A new
    mapping each time: a test may change the config it is part of."""
    return {"seconds": 0, "steps": 0}


# DLIO's sleep-only emulated H100 (host_work: none), for tests that attribute the input pipeline:
# with a ResNet-50 trainer's host work a 16-sample step is the trainer's 20 ms on 2 cores, not the
# H100's 2.3 ms (docs/method.md, The trainer's host)
SLEEPING_H100 = {
    "kind": "emulated",
    "type": "h100",
    "model": "resnet50",
    "demand": "training",
    "host_work": "none",
}
