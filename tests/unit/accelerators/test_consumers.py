from __future__ import annotations

import time

import pytest
import torch

from iobench.accelerators.consumers import TorchTrainStep
from iobench.cell.steps.steploop import run_steps
from loaders import ShardLoader
from tests.helpers.summaries import metrics_of


def test_real_cpu_training_step_on_real_batches(tiny_dataset):
    urls = sorted(str(p) for p in tiny_dataset.glob("train-*.tar"))
    loader = ShardLoader(urls, batch_size=16, workers=0, return_batches=True)
    consumer = TorchTrainStep("small_cnn", device="cpu")
    before = [p.detach().clone() for p in consumer.model.parameters()]
    log = run_steps(lambda e: loader, consumer, created_at=time.perf_counter(), warmup_steps=1, max_steps=4)
    m = metrics_of(log.rows, log.time_to_first_batch_s)
    assert m.steps == 3 and m.samples == 48
    assert all(r.compute_s > 0 and r.h2d_s > 0 for r in log.rows)
    assert m.au + m.stall_fraction <= 1.0 + 1e-6
    # the step really trained: parameters moved
    assert any(
        not torch.equal(a, b.detach()) for a, b in zip(before, consumer.model.parameters(), strict=True)
    )
    assert consumer.describe()["device"] == "cpu" and consumer.demand_samples_per_s is None


def test_resnet50_has_the_reference_parameter_count():
    from iobench.accelerators.models import ResNet50

    n = sum(p.numel() for p in ResNet50().parameters())
    assert n == 25_557_032  # torchvision's resnet50


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (device machine)")
def test_resnet50_amp_channels_last_step_on_cuda():
    step = TorchTrainStep("resnet50", device="cuda")
    images = torch.randint(0, 255, (32, 3, 224, 224), dtype=torch.uint8).contiguous(
        memory_format=torch.channels_last
    )
    labels = torch.randint(0, 1000, (32,))
    x, y, h2d = step.h2d(images.pin_memory(), labels)
    assert x.is_cuda and x.is_contiguous(memory_format=torch.channels_last) and h2d > 0
    assert step.step(x, y) > 0 and step.amp
