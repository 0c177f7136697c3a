"""The dashboard's pure parts: what a field may show (`snapshot.clean`), the jobs page's
order, filters and pages (`snapshot.select`), the curves' geometry (`charts.chart`), and
the command's refusals of bad options."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from mxgitops.cli import main
from mxgitops.dashboard import charts
from mxgitops.dashboard.snapshot import MAX_TEXT, Query, clean, select, snapshot
from mxgitops.outputs.summary import JobSummary, Summary


def test_clean_replaces_control_and_bidirectional_characters_and_cuts() -> None:
    shown = clean("a\x1b[31mred\u202eevil\u2066x\x00\tline\n2")
    assert shown == "a\ufffd[31mred\ufffdevil\ufffdx\ufffd line\n2"  # a log keeps its lines
    long = clean("x" * 10_000)
    assert len(long) == MAX_TEXT and long.endswith("…")


def _snapshot(*jobs: JobSummary):  # type: ignore[no-untyped-def]
    return snapshot(
        branch="main",
        tip="t",
        note_commit="t",
        summary=Summary(jobs=jobs),
        refused="",
        records={},
        authors={},
        read_at="",
    )


def test_attention_first_then_by_name_and_the_filters() -> None:
    snap = _snapshot(
        JobSummary("b", "done", "create", "", state="Succeeded"),
        JobSummary("a", "runs", "create", "", state="Running"),
        JobSummary("a", "waits", "create", "", state="Pending"),
        JobSummary("b", "broke", "create", "", state="Failed"),
        JobSummary("a", "bad", "hold", "", errors=("invalid manifest",)),
    )
    order = [f"{r.job.namespace}/{r.job.name}" for r in snap.rows]
    assert order == ["a/bad", "b/broke", "a/waits", "a/runs", "b/done"]
    assert [r.state for r in snap.rows] == ["error", "Failed", "Pending", "Running", "Succeeded"]
    assert snap.namespaces == ("a", "b")
    names = [r.job.name for r in select(snap.rows, Query(namespace="a", text="RUN")).rows]
    assert names == ["runs"]
    assert [r.job.name for r in select(snap.rows, Query(state="Failed")).rows] == ["broke"]


def test_pages_are_bounded_and_the_query_is_read_strictly() -> None:
    snap = _snapshot(*(JobSummary("a", f"j{n:02d}", "create", "") for n in range(25)))
    page = select(snap.rows, Query(page=3, size=10))
    assert (page.number, page.pages, page.matched, len(page.rows)) == (3, 3, 25, 5)
    assert select(snap.rows, Query(page=9, size=10)).number == 3
    query = Query.of({"page": ["²"], "size": ["99999"], "q": ["x" * 500], "state": ["a", "b"]})
    assert (query.page, query.size, len(query.text), query.state) == (1, 200, 100, "a")


def test_a_chart_puts_each_point_at_its_epoch_and_value() -> None:
    drawn = charts.chart("loss", [("new", {1: 2.0, 2: 1.0, 3: 0.5}), ("old", {1: 3.0, 2: 2.5})])
    assert drawn is not None
    new, old = drawn.lines
    assert [p.epoch for p in new.points] == [1, 2, 3] and len(old.points) == 2
    assert new.points[0].x == old.points[0].x == charts.LEFT
    assert new.points[-1].x == charts.WIDTH - charts.RIGHT
    ys = sorted((p.y, p.value) for line in drawn.lines for p in line.points)
    values = [p.value for line in drawn.lines for p in line.points]
    assert [value for _, value in ys] == sorted(values, reverse=True)  # higher is up
    assert all(charts.TOP <= y <= charts.HEIGHT - charts.BOTTOM for y, _ in ys)


def test_a_chart_of_one_point_or_flat_values_stays_inside_and_runs_are_bounded() -> None:
    single = charts.chart("acc", [("a", {5: 0.5})])
    assert single is not None
    (point,) = single.lines[0].points
    assert charts.LEFT < point.x < charts.WIDTH - charts.RIGHT
    assert charts.TOP < point.y < charts.HEIGHT - charts.BOTTOM
    many = charts.chart("acc", [(str(n), {1: float(n)}) for n in range(50)])
    assert many is not None and len(many.lines) == charts.MAX_RUNS
    assert charts.chart("acc", [("a", {})]) is None


def test_the_command_refuses_bad_options(tmp_path: Path) -> None:
    runner = CliRunner()
    for args, message in (
        (["--base-path", "/a b"], "--base-path"),
        (["--base-path", "/x/../y"], "--base-path"),
        (["--commit-url", "javascript:alert(1)/{sha}"], "--commit-url"),
        (["--commit-url", "https://forge/commit/"], "--commit-url"),
        (["--listen", "nowhere"], "--listen"),
        (["--repo", str(tmp_path)], "plain directory"),
    ):
        result = runner.invoke(main, ["dashboard", "--repo", "file:///nowhere.git", *args])
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output
