"""Trace parsing: good traces load sorted and typed; every bad cell names its line and column."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from scheduler_core.sim.trace import TraceError, TraceJob, load_trace, parse_trace, write_trace

HEADER = "job_id,submit_s,gpus,duration_s,runtime_limit_s,user"


def parse(text: str) -> list[TraceJob]:
    return parse_trace(io.StringIO(text), "t.csv")


def test_required_columns_parse_into_typed_jobs_sorted_by_submit_time() -> None:
    jobs = parse(f"{HEADER}\nb,120,16,3780,10800,hana\na,60,1,600.5,,gus\n")
    assert [job.job_id for job in jobs] == ["a", "b"]
    assert jobs[0] == TraceJob("a", 60.0, 1, 600.5, None, "gus")
    assert jobs[1].runtime_limit_s == 10800.0 and jobs[1].gpus == 16


def test_optional_columns_are_read_in_any_order() -> None:
    text = (
        "max_gpus,job_id,submit_s,gpus,duration_s,runtime_limit_s,user,team,priority,gpu_type,checkpoint_interval_s,min_gpus\n"
        "32,j1,0,16,3600,7200,ann,vision,5,h100,900,8\n"
    )
    (job,) = parse(text)
    assert (job.team, job.priority, job.gpu_type) == ("vision", 5, "h100")
    assert (job.checkpoint_interval_s, job.min_gpus, job.max_gpus) == (900.0, 8, 32)


def test_optional_columns_may_be_left_empty() -> None:
    (job,) = parse(f"{HEADER},team,priority,min_gpus\nj1,0,4,60,,u,,,\n")
    assert (job.team, job.priority, job.min_gpus, job.runtime_limit_s) == ("", 0, None, None)


@pytest.mark.parametrize(
    ("line", "column", "fragment"),
    [
        ("j1,0,abc,60,120,u", "gpus", "expected an integer, got 'abc'"),
        ("j1,0,0,60,120,u", "gpus", "expected an integer >= 1, got '0'"),
        ("j1,-5,1,60,120,u", "submit_s", ">= 0"),
        ("j1,0,1,0,120,u", "duration_s", "> 0"),
        ("j1,0,1,,120,u", "duration_s", "empty cell"),
        ("j1,0,1,60,soon,u", "runtime_limit_s", "got 'soon'"),
        ("j1,0,1,60,nan,u", "runtime_limit_s", "finite"),
        (",0,1,60,120,u", "job_id", "empty cell"),
    ],
    ids=["gpus-not-a-number", "zero-gpus", "negative-submit", "zero-duration", "missing-duration",
         "limit-not-a-number", "limit-nan", "empty-id"],
)
def test_bad_cell_is_reported_with_line_and_column(line: str, column: str, fragment: str) -> None:
    with pytest.raises(TraceError) as caught:
        parse(f"{HEADER}\nok,0,1,60,120,u\n{line}\n")
    assert caught.value.line == 3
    assert caught.value.column == column
    assert fragment in str(caught.value)
    assert str(caught.value).startswith(f"t.csv, line 3, column '{column}'")


def test_elastic_bounds_must_bracket_the_preferred_size() -> None:
    with pytest.raises(TraceError, match="column 'min_gpus': expected at most gpus \\(8\\), got 16"):
        parse(f"{HEADER},min_gpus\nj1,0,8,60,120,u,16\n")
    with pytest.raises(TraceError, match="column 'max_gpus': expected at least gpus \\(8\\), got 4"):
        parse(f"{HEADER},max_gpus\nj1,0,8,60,120,u,4\n")


def test_a_jobs_own_layout_is_read_and_must_fit_in_the_job() -> None:
    (job,) = parse(f"{HEADER},gpus_per_node\nj1,0,16,60,120,u,4\n")
    assert job.gpus_per_node == 4
    with pytest.raises(TraceError, match="column 'gpus_per_node': expected at most gpus \\(8\\), got 16"):
        parse(f"{HEADER},gpus_per_node\nj1,0,8,60,120,u,16\n")
    with pytest.raises(TraceError, match="column 'gpus_per_node': expected an integer >= 1, got '0'"):
        parse(f"{HEADER},gpus_per_node\nj1,0,8,60,120,u,0\n")


def test_missing_required_column_is_named() -> None:
    with pytest.raises(TraceError, match="line 1, column 'runtime_limit_s': required column missing"):
        parse("job_id,submit_s,gpus,duration_s,user\nj1,0,1,60,u\n")


def test_unknown_column_is_refused() -> None:
    with pytest.raises(TraceError, match="column 'colour': unknown column"):
        parse(f"{HEADER},colour\nj1,0,1,60,120,u,red\n")


def test_duplicate_job_id_names_both_lines() -> None:
    with pytest.raises(TraceError, match="line 3, column 'job_id': job id 'j1' already used on line 2"):
        parse(f"{HEADER}\nj1,0,1,60,120,u\nj1,5,1,60,120,u\n")


def test_short_row_is_refused() -> None:
    with pytest.raises(TraceError, match="line 2: expected 6 cells as in the header, got 4"):
        parse(f"{HEADER}\nj1,0,1,60\n")


def test_empty_file_and_missing_file_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="empty"):
        parse("")
    with pytest.raises(TraceError, match="cannot read the trace"):
        load_trace(tmp_path / "absent.csv")


def test_write_then_load_round_trips(tmp_path: Path) -> None:
    jobs = [TraceJob("a", 0.0, 8, 3600.0, 7200.0, "ann"), TraceJob("b", 60.0, 1, 90.5, None, "bo")]
    path = tmp_path / "w.csv"
    path.write_text(write_trace(jobs))
    assert load_trace(path) == jobs


@pytest.mark.parametrize(
    ("header", "cells", "column"),
    [(",min_gpus", ",4", "max_gpus"), (",max_gpus", ",32", "min_gpus"), (",min_gpus,max_gpus", ",4,", "max_gpus")],
    ids=["min-only-column", "max-only-column", "max-cell-empty"],
)
def test_half_an_elastic_range_is_refused_naming_the_missing_bound(header: str, cells: str, column: str) -> None:
    # the engine refuses min_gpus without max_gpus (InvalidRequest): replayed, such a job waited forever
    with pytest.raises(TraceError) as caught:
        parse(f"{HEADER}{header}\nj1,0,16,60,120,u{cells}\n")
    assert (caught.value.line, caught.value.column) == (2, column)
    assert "needs both min_gpus and max_gpus" in str(caught.value)


def test_a_byte_order_mark_before_the_header_is_not_part_of_the_first_column(tmp_path: Path) -> None:
    path = tmp_path / "excel.csv"
    path.write_bytes(b"\xef\xbb\xbf" + f"{HEADER}\nj1,0,1,60,120,u\n".encode())
    assert [job.job_id for job in load_trace(path)] == ["j1"]


def test_a_file_that_is_not_utf8_is_a_trace_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes(f"{HEADER}\nj1,0,1,60,120,".encode() + b"Jos\xe9\n")
    with pytest.raises(TraceError, match=r"latin1.csv: the trace is not UTF-8 text \(byte \d+ is 0xe9\)"):
        load_trace(path)
