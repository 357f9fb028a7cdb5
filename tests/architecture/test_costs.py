"""A test's cost is marked by the fixtures it uses (tests/helpers/cost.py): the hook must keep
marking, its table must name fixtures that exist, and expensive processes must be started through
those fixtures, where the hook sees them."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from tests.helpers.cost import COSTS, marks_for
from tests.helpers.paths import ROOT
from tests.helpers.processes import cell_results_of

PLUGINS = '["tests.helpers.cost", "tests.helpers.lab_fixture", "tests.helpers.processes"]'

# every expensive fixture, directly and through a fixture of the test's own
TESTS = """
import pytest


@pytest.fixture
def staged(ceph_lab):
    return ceph_lab


def test_cheap(tmp_path, iobench):
    pass


def test_lab(ceph_lab):
    pass


def test_through_a_fixture(staged):
    pass


def test_breaks_the_lab(lab_to_break):
    pass


def test_own_lab(own_lab_dir):
    pass


def test_sweep(iobench_sweep):
    pass


def test_torchrun(torchrun):
    pass
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(f"pytest_plugins = {PLUGINS}")
    pytester.makepyfile(test_costs=TESTS)
    return pytester


def _collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider", *args)
    return sorted(line.split("::")[1] for line in result.outlines if "::" in line)


def test_the_quick_loop_leaves_out_every_test_using_an_expensive_fixture(project):
    # collection only: no lab starts, no process runs
    assert _collected(project, "-m", "not slow") == ["test_cheap"]
    assert _collected(project, "-m", "integration") == [
        "test_breaks_the_lab",
        "test_lab",
        "test_own_lab",
        "test_through_a_fixture",
    ]
    assert _collected(project, "-m", "slow and not integration") == ["test_sweep", "test_torchrun"]


def test_a_hand_mark_adds_to_the_fixtures_marks_and_cannot_take_them_away(project):
    project.makepyfile(
        test_marked=textwrap.dedent(
            """
            import pytest

            @pytest.mark.slow
            def test_marked_slow_by_hand():
                pass

            @pytest.mark.skipif(False, reason="a mark of another kind")
            def test_otherwise_marked(ceph_lab):
                pass
            """
        )
    )
    assert _collected(project, "-m", "slow", "test_marked.py") == [
        "test_marked_slow_by_hand",
        "test_otherwise_marked",
    ]


def test_a_unit_test_using_the_lab_is_refused_at_collection(project):
    project.mkpydir("unit")
    (project.path / "unit" / "test_misplaced.py").write_text("def test_reads_s3(ceph_lab):\n    pass\n")
    result = project.runpytest("--collect-only", "-q", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*tests under tests/unit/ use no services*unit/test_misplaced.py::test_reads_s3*"]
    )


def test_the_table_names_fixtures_that_exist(project):
    # a fixture renamed without its entry here would silently stop marking
    shown = {
        line.split()[0] for line in project.runpytest("--fixtures", "-p", "no:cacheprovider").outlines if line
    }
    for name in COSTS:
        assert name in shown, f"COSTS names {name!r}, which no plugin defines"
    assert marks_for(["tmp_path", "ceph_lab"]) == ["integration", "slow"]


# what starts a sweep's cells or torchrun; only tests/helpers/processes.py may name them
EXPENSIVE_ARGV = {"iobench.cli", "torch.distributed.run", "torchrun"}


def test_expensive_processes_are_started_only_through_the_fixtures():
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path in (ROOT / "tests" / "helpers" / "processes.py", Path(__file__)):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            # a command line's words: items of a list or tuple, or arguments of a call
            if isinstance(node, (ast.List, ast.Tuple)):
                words = node.elts
            elif isinstance(node, ast.Call):
                words = node.args
            else:
                continue
            for word in words:
                if isinstance(word, ast.Constant) and word.value in EXPENSIVE_ARGV:
                    found.append(f"{path.relative_to(ROOT)}:{word.lineno}: {word.value!r}")
            if getattr(getattr(node, "func", None), "attr", None) == "with_name" and any(
                isinstance(a, ast.Constant) and a.value == "iobench" for a in words
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: the iobench console script")
    assert found == [], (
        "start these through the iobench / iobench_sweep / torchrun fixtures "
        "(tests/helpers/processes.py), so the cost hook marks the test:\n" + "\n".join(found)
    )


def test_the_cheap_cli_fixture_sees_the_cells_a_command_ran(tmp_path):
    out = tmp_path / "run"
    (out / "disk-torch-w0").mkdir(parents=True)
    (out / "disk-torch-w0" / "summary.json").write_text("{}")
    assert cell_results_of(["sweep", "s.yaml", "--out", out], None) == {
        out / "disk-torch-w0" / "summary.json"
    }
    assert cell_results_of(["sweep", "s.yaml", "--out", "run"], tmp_path) == {
        out / "disk-torch-w0" / "summary.json"
    }
    default = tmp_path / "iobench-runs" / "20261204-120000" / "disk-torch-w0"
    default.mkdir(parents=True)
    (default / "summary.json").write_text("{}")
    assert cell_results_of(["sweep", "s.yaml"], tmp_path) == {default / "summary.json"}
