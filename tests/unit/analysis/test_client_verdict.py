"""The object client in the verdict (analysis/verdict.py): its CPU per request and per GiB and its
own retries as evidence, and a fetch-bound cell whose client's CPU takes a quarter of the readers'
time or more called bound by the client, not the store."""

from __future__ import annotations

import pytest

from iobench.analysis.cellfigures import analyse
from iobench.analysis.evidence import ClientFacts, client_facts
from iobench.analysis.verdict import CLIENT_BOUND
from iobench.results.figures import StepRow, Verdict
from iobench.results.spec import MinMeasure
from loaders import StageStats
from loaders.observe import RequestCounts
from loaders.storage import CLIENT_NAMES, CLIENTS, describe_client, installed_clients
from loaders.storage.clients import OWN_RETRIES_OFF
from tests.helpers.summaries import judge_of, metrics_of, run_facts

STEPS, BATCH, READERS = 10, 64, 2
SAMPLE_BYTES = 110_000


def _rows() -> list[StepRow]:
    """Steps that wait 0.2 s for a batch and compute 0.05 s: AU 0.2, not the trainer's doing."""
    rows, t = [], 0.0
    for i in range(STEPS):
        end = t + 0.25
        rows.append(StepRow(i, 0, False, t, 0.2, 0.0, 0.05, end, BATCH, BATCH * SAMPLE_BYTES))
        t = end
    return rows


def _stats(client_cpu_s: float, *, requests: int = STEPS * BATCH, client_retries: int = 0) -> StageStats:
    """A fetch-bound reader's stage times (fetch 9 ms a sample, decode 1 ms) and its counters."""
    s = StageStats(samples=STEPS * BATCH)
    s.add_time("fetch", 0.009 * STEPS * BATCH, 0.002 * STEPS * BATCH)
    s.add_time("decode", 0.001 * STEPS * BATCH, 0.001 * STEPS * BATCH)
    s.counters.requests = RequestCounts(
        requests=requests,
        bytes_transferred=requests * SAMPLE_BYTES,
        client_cpu_s=client_cpu_s,
        client_retries=client_retries,
    )
    return s


def _cpu_at(share: float) -> float:
    """The client CPU seconds that are ``share`` of the readers' time over the measured wall."""
    return share * READERS * metrics_of(_rows()).wall_s


def _verdict(client: ClientFacts | None, share: float, **counters) -> Verdict:
    return judge_of(
        metrics_of(_rows()), _stats(_cpu_at(share), **counters), workers=READERS, cores=2, client=client
    )


MINIO = ClientFacts("minio", "7.2.15")
S3FS_OWN = "aiohttp resends a GET or HEAD once, at once, when its connection broke before any answer"
S3FS = ClientFacts("s3fs", "2025.3.0", S3FS_OWN)
OBSTORE = ClientFacts("obstore", "0.8.2")


def test_the_evidence_names_the_client_its_cpu_per_request_and_per_gib_and_its_own_retries():
    v = _verdict(MINIO, 0.19)
    cpu = _cpu_at(0.19)
    per_request_ms = 1000 * cpu / (STEPS * BATCH)
    per_gib = cpu / (STEPS * BATCH * SAMPLE_BYTES / 2**30)
    line = (
        f"client: minio 7.2.15: {per_request_ms:.2f} ms of CPU per request, {per_gib:.1f} CPU-s per GiB; "
        "its own retries: 0 (turned off)"
    )
    assert line in v.evidence
    # after the finding's own lines, what was measured and where a sample's time goes
    measured = next(i for i, e in enumerate(v.evidence) if e.startswith("measured "))
    per_sample = next(i for i, e in enumerate(v.evidence) if e.startswith("per sample, "))
    assert measured < per_sample < v.evidence.index(line)


def test_own_retries_are_the_counted_ones_or_said_not_to_be_counted():
    crt = _verdict(ClientFacts("s3torchconnector", "1.4.3", "the CRT retries ..."), 0.1, client_retries=3)
    assert any(e.endswith("its own retries: 3 counted (the CRT retries ...)") for e in crt.evidence)
    s3fs = _verdict(S3FS, 0.1)
    assert any(e.endswith(f"its own retries: not counted ({S3FS_OWN})") for e in s3fs.evidence)


def test_a_tier_without_an_object_client_has_no_client_evidence():
    v = _verdict(None, 0.33)
    assert v.headline.startswith("fetch-bound (storage)")
    assert not any(e.startswith("client:") or "readers' time" in e for e in v.evidence)


def test_a_client_that_made_no_requests_says_so_and_does_not_bind():
    v = _verdict(MINIO, 0.0, requests=0)
    assert "client: minio 7.2.15: made no requests over the measured steps" in v.evidence
    assert v.headline.startswith("fetch-bound (storage)")


def test_fetch_bound_with_the_clients_cpu_at_s3fs_share_is_bound_by_the_client():
    v = _verdict(S3FS, 0.33)
    assert v.bound == "fetch" and v.binding_stage == "fetch"
    assert v.headline.startswith(
        "fetch-bound by the client (s3fs), not the store: its CPU takes 33 % of the readers' time; "
        "reading takes 90 % of each reader's time per sample"
    )
    assert "s3fs's own CPU took 33 % of the readers' time (at or above the 25 %" in " ".join(v.evidence)
    assert "obstore" in v.action and "minio where the DataLoader's workers must be forked" in v.action
    assert "docs/tiers.md" in v.action


def test_fetch_bound_with_the_clients_cpu_at_obstore_share_is_the_stores():
    v = _verdict(OBSTORE, 0.08)
    assert v.headline.startswith("fetch-bound (storage): reading takes 90 %")
    assert "obstore's own CPU took 8 % of the readers' time (below the 25 %" in " ".join(v.evidence)
    assert "a faster tier" in v.action


def test_the_threshold_is_inclusive_and_obstore_bound_is_told_to_spread_its_cpu():
    assert _verdict(MINIO, CLIENT_BOUND).headline.startswith("fetch-bound by the client (minio)")
    assert "minio where" not in _verdict(MINIO, CLIENT_BOUND).action  # minio is not its own alternative
    v = _verdict(OBSTORE, 0.4)
    assert v.headline.startswith("fetch-bound by the client (obstore)") and "more readers" in v.action


@pytest.mark.parametrize("name", CLIENT_NAMES)
def test_client_facts_come_from_the_registry_and_say_what_the_tiers_description_says(name):
    if name not in installed_clients():
        pytest.skip(f"{name} is not installed")
    facts = client_facts(name)
    entry = CLIENTS.entry(name)
    assert facts == ClientFacts(name, entry.version(), entry.load().own_retries)
    # a client whose own retries are off has nothing more to say; the others, what they retry
    off = name in ("minio", "obstore", "s3dlio")
    assert (facts.own_retries is None) == off
    recorded = describe_client(name)  # what an S3 tier's description holds of its client (the manifest)
    assert (recorded["client"], recorded["client_version"]) == (facts.name, facts.version)
    assert recorded["client_own_retries"] == (facts.own_retries or OWN_RETRIES_OFF)


def test_a_tier_that_reads_through_no_object_client_has_no_client_facts():
    assert client_facts(None) is None


def test_the_cells_analysis_passes_the_client_to_the_verdict():
    stats = _stats(_cpu_at(0.33))
    facts = run_facts(
        workers=READERS,
        au_basis="emulated device time",
        min_measure=MinMeasure(steps=1, seconds=0.0),
        client=S3FS,
    )
    v = analyse(_rows(), facts=facts, epoch_stats=[stats], measured_stats=stats).verdict
    assert v.headline.startswith("fetch-bound by the client (s3fs)")
    assert any(e.startswith("client: s3fs 2025.3.0: ") for e in v.evidence)
