"""The HTML report of a real run (two small sweeps through the CLI), rendered in headless Chromium.

The run has a diagnosed cell on a tier named like an XSS probe, a cell with two epochs and no
diagnosis (so the attribution figure shows both sources), and a cell that failed on a path that is
itself HTML. Chromium must show every figure and keep every hostile string as text.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import types
import typing
from dataclasses import replace
from pathlib import Path

import markupsafe
import pytest
import yaml
from PIL import Image

from iobench.report.html import render_html, write_html
from iobench.results import store
from iobench.results.api import load_steps
from iobench.results.codec import from_json, to_json
from iobench.results.store import write_results_table
from iobench.results.summary import CellSummary
from tests.helpers.processes import Sweeps
from tests.helpers.runs import exact_epochs

HOSTILE_TIER = "<script>alert(1)</script>"
HOSTILE_PATH = "<img src=x onerror=alert(2)>"
PLOT_IDS = ("plot-throughput", "plot-attribution", "plot-au-workers", "plot-wait", "plot-timeline")


def _sweep(
    sweeps: Sweeps, base: Path, name: str, dataset: Path, tiers: list[dict], workers: list[int], run: dict
) -> Path:
    cfg = {
        "dataset": {"path": str(dataset)},
        "tiers": tiers,
        "loaders": [{"kind": "torch", "workers": workers, "batch_size": [16], "shuffle_buffer": 64}],
        "accelerators": [{"kind": "emulated", "type": "h100", "model": "resnet50", "demand": "training"}],
        "run": {"warmup_steps": 2, "min_measure": exact_epochs(), **run},
    }
    path = base / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = base / name
    proc = sweeps.run("sweep", path, "--out", out)
    assert (out / "results.parquet").exists(), proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="module")
def run_dir(iobench_sweep, tmp_path_factory, tiny_dataset) -> Path:
    base = tmp_path_factory.mktemp("html-report")
    hostile = {"kind": "local", "name": HOSTILE_TIER, "path": str(tiny_dataset)}
    gone = {"kind": "local", "name": "gone", "path": str(base / HOSTILE_PATH)}
    run = _sweep(
        iobench_sweep, base, "diag", tiny_dataset, [hostile, gone], [1], {"diagnose": True, "max_steps": 12}
    )
    plain = {"kind": "local", "name": "disk", "path": str(tiny_dataset)}
    epochs = _sweep(iobench_sweep, base, "epochs", tiny_dataset, [plain], [0], {"epochs": 2})
    # one run directory holding both sweeps' cells, as a sweep of both would have written it
    for cell in epochs.glob("disk-*"):
        shutil.copytree(cell, run / cell.name)
    write_results_table(run)
    return run


@pytest.fixture(scope="module")
def chromium() -> str:
    """Checked before the run is made, so a missing browser costs no sweep."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set and chromium is missing: .ci/run installs it (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium): the rendered page is not checked")
    return exe


def cell_summaries(run_dir: Path) -> list[dict]:
    """The run's summaries as JSON, as summary.json holds them: the tests read and poison them."""
    return [to_json(s) for s in store.cell_summaries(run_dir)]


def typed(summaries: list[dict]) -> list[CellSummary]:
    return [from_json(CellSummary, s) for s in summaries]


def _chrome(exe: str, page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={profile}",
            *args,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_report_renders_in_chromium_with_every_figure_and_hostile_names_as_text(chromium, run_dir, tmp_path):
    page = write_html(run_dir, tmp_path / "report.html")

    shot = tmp_path / "report.png"
    proc = _chrome(chromium, page, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1400,3000")
    assert shot.exists(), proc.stderr
    with Image.open(shot) as im:
        assert im.size == (1400, 3000)
        # not a blank page: the figures' fills (decode orange, wait red, compute green) are on it
        colours = {c for _, c in im.convert("RGB").getcolors(maxcolors=1 << 20)}
    assert {(0xEF, 0x6C, 0x00), (0xC6, 0x28, 0x28), (0x2E, 0x7D, 0x32)} <= colours

    dom = _chrome(chromium, page, tmp_path / "profile", "--dump-dom").stdout
    tags = dict((i, t) for t, i in re.findall(r'<(\w+)[^>]*\bid="(plot-[a-z-]+)"', dom))
    assert {i: tags.get(i) for i in PLOT_IDS} == dict.fromkeys(PLOT_IDS, "figure")
    assert tags["plot-cache-hit"] == "p"  # local tiers have no shard cache: a note, not an empty plot
    for plot_id in PLOT_IDS:  # each figure's SVG was parsed into elements, with its ids kept apart
        assert f'id="{plot_id.removeprefix("plot-")}-figure_1"' in dom
    # the probes are text in the table, the figures' legends, the error and the tier description
    assert not re.search(r"<(script|img)\b", dom, re.IGNORECASE)
    assert dom.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 3
    assert "&lt;img src=x onerror=alert(2)&gt;" in dom


def test_report_is_self_contained_and_says_everything_in_words(run_dir):
    page = write_html(run_dir)
    assert page == run_dir / "report.html"
    text = page.read_text()
    assert not re.search(r"https?:|<(script|link|img|iframe)\b|\bsrc=\"|url\((?!#)", text, re.IGNORECASE)
    # six inlined SVGs in one document: every id once, every reference to one of them
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids))
    assert set(re.findall(r'(?:href="#|url\(#)([^")]+)', text)) <= set(ids)
    summaries = {s["cell"]["cell_id"]: s for s in cell_summaries(run_dir)}
    diag = next(s for s in summaries.values() if s["cell"]["tier"]["name"] == HOSTILE_TIER)
    plain = next(s for s in summaries.values() if s["cell"]["tier"]["name"] == "disk")
    failed = next(s for s in summaries.values() if s["status"] == "failed")
    # every cell is in the table, the failed one with its error
    assert text.count('<tr class="failed-row">') == 1 and text.count('<section class="cell') == 3
    assert "does not exist" in failed["error"]
    for s in (diag, plain):
        v = s["verdict"]
        assert _esc(v["headline"]) in text
        assert all(_esc(line) in text for line in v["evidence"])
    assert _esc(diag["attribution"]["statement"]) in text
    assert "capacity: this tier + loader" in text
    # the measured window, in the table and in the lines of each of the two measured cells
    assert (
        "<th>window</th>" in text
        and text.count("window: ") == 2
        and "reads: the cell&#39;s processes read" in text
    )
    assert diag["epoch1_vs_steady"] is not None and "steady state vs the whole of epoch 1" in text
    assert all(_esc(w) in text for w in plain["warnings"])
    # every cell's wall split comes from its steps' accounts, diagnosed or not: one source
    assert "the wall split (sums to 100 %)" in text and "(differential)" not in text
    # the page opens with the bottom line, and each cell's details fold away
    assert text.index('id="bottom-line"') < text.index('id="summary"')
    assert text.count("<details><summary>every figure of this cell</summary>") == 2
    # the step timeline is of the slowest cell
    slowest = min((diag, plain), key=lambda s: s["metrics"]["samples_per_s"])
    assert f"Every step of the slowest cell, <code>{_esc(slowest['cell']['cell_id'])}</code>" in text
    assert "no cache in this run" in text


def test_cache_hit_figure_appears_when_a_cell_has_per_epoch_hits(run_dir):
    summaries = cell_summaries(run_dir)
    plain = next(s for s in summaries if s["cell"]["tier"]["name"] == "disk")
    for e, ratio in zip(plain["epochs"], (0.0, 1.0), strict=True):
        e.update(cache_hit_ratio=ratio, cache_hits=int(8 * ratio), cache_misses=int(8 * (1 - ratio)))
    plain["cell"]["tier"]["name"] = "cost $5 & <b>up</b>"  # a dollar is not mathtext; the tags stay text
    steps = {
        s["cell"]["cell_id"]: load_steps(run_dir, s["cell"]["cell_id"]) for s in summaries if s["metrics"]
    }
    page = render_html(typed(summaries), steps, title="t")
    assert '<figure id="plot-cache-hit">' in page and "no cache in this run" not in page
    assert "8/8 (100 %)" in page
    assert "cost $5 &amp; &lt;b&gt;up&lt;/b&gt;" in page and "<b>" not in page


def test_the_cli_starts_without_matplotlib():
    code = (
        "import sys, iobench.cli, iobench.report.html, iobench.report.compare, iobench.results; "
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported at start-up'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def _esc(text: str) -> str:
    """As the page escapes text (Jinja2's autoescape: markupsafe, ' as &#39;)."""
    return str(markupsafe.escape(text))


PROBE = "<script>alert('x')</script><img src=x onerror=alert(3)>"


def _poison(tp, obj, skip: frozenset[str]):
    """Every free-text string of a record (a field typed ``str``) with the probe appended, led by the
    record's types: a Literal is a choice that picks code paths, not text, and the ids the steps are
    keyed by are left as they are."""
    if obj is None:
        return None
    origin = typing.get_origin(tp)
    if tp is str:
        return obj + PROBE
    if origin is typing.Union or origin is types.UnionType:
        texts = [a for a in typing.get_args(tp) if a is not type(None)]
        return _poison(texts[0], obj, skip) if len(texts) == 1 else obj
    if origin in (list, tuple):
        (item, *_) = typing.get_args(tp) or (None,)
        return [_poison(item, v, skip) for v in obj]
    if origin is dict:
        _, value = typing.get_args(tp) or (str, None)
        return {k: _poison(value, v, skip) for k, v in obj.items()}
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return {k: (v if k in skip else _poison(hints.get(k), v, skip)) for k, v in obj.items()}
    return obj


def test_every_string_of_a_run_reaches_the_page_as_text(run_dir):
    """Tier names are not the only strings a user or a failure controls: notes, warnings, errors,
    verdict evidence, paths and host names are all written into the page. Poison every one."""
    summaries = cell_summaries(run_dir)
    steps = {
        s["cell"]["cell_id"]: load_steps(run_dir, s["cell"]["cell_id"]) for s in summaries if s["metrics"]
    }
    skip = frozenset({"cell_id", "started_at", "finished_at"})
    poisoned = [_poison(CellSummary, s, skip) for s in summaries]
    page = render_html(typed(poisoned), steps, title="run" + PROBE, host="host" + PROBE)
    assert not re.search(r"<(script|img)\b", page, re.IGNORECASE)
    # the probes are on the page, as text: names, paths, notes, verdicts, evidence, errors
    assert page.count(_esc(PROBE)) >= 20


def test_the_timeline_shows_the_rank_that_tells_most():
    import pyarrow as pa

    from iobench.report.html import one_rank, timeline_of
    from iobench.results.figures import Distributed, Interval, RankFigures
    from tests.helpers.summaries import ok_summary

    steps = pa.table({"rank": [0, 1, 0, 1], "step": [0, 0, 1, 1]})
    assert one_rank(steps, 1).column("rank").to_pylist() == [1, 1]
    assert one_rank(steps, None).num_rows == 4  # a one-rank cell: every step

    def rank(r: int, peer_wait: float) -> RankFigures:
        return RankFigures(
            r, r, 0, "h", 10, 80, 1, 80.0, 1.0, 0.1, 0.2, 0.2, 0.1, 5.0, 1, "prep", None, None, peer_wait
        )

    one = ok_summary("one", 50.0)
    free = replace(
        ok_summary("free", 100.0),
        distributed=Distributed(2, 1, 2, ("h",), Interval(0.0, 1.0, 1.0), 0.0, 100.0, 1e6, 1.5, 1, "h", 40.0),
    )
    assert timeline_of([one, free]) == (one, None)  # free-running only: the slowest cell
    assert timeline_of([free]) == (free, 1)  # ... in a multi-rank cell, its slowest rank
    step = replace(
        free,
        distributed=replace(free.distributed, sync="allreduce", peer_wait_fraction=0.3),
        ranks=(rank(0, 0.4), rank(1, 0.01)),
    )
    # in step: the rank that waited most for its peers, whatever the rates
    assert timeline_of([one, free, step]) == (step, 0)
