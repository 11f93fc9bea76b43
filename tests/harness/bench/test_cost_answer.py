"""The cost benchmark: what profiling adds beyond the program's own runs, from faked timings (the benchmark's
numbers themselves are the machine's, in bench/results.json, never a test's)."""
import subprocess

import pytest

from analysis.errors import HeapcostError
from analysis.harness.workloads import cost_inputs, cost_programs
from analysis.harness.bench import command, cost_answer


@pytest.fixture(autouse=True)
def no_inputs_written(monkeypatch, tmp_path):
    monkeypatch.setattr(cost_inputs, "write_inputs", lambda folder: {})


def test_what_profiling_adds_is_its_wall_time_less_the_runs_it_makes(monkeypatch):
    walls = iter([0.2] * 3 + [3.0, 9.0, 0.8, 0.7, 0.9])  # alone x3, profile, first answer, kept x3

    def timed(argv, **kw):
        return next(walls), subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(cost_answer, "_timed", timed)
    monkeypatch.setattr(cost_answer, "_has_strace", lambda: True)
    r = cost_answer.cost_bench(answers=3, alone_runs=3)
    assert r["profile_runs"] == 8  # counting, system calls, six timed
    assert r["added_beyond_runs_s"] == pytest.approx(3.0 + 0.8 - 8 * 0.2)
    assert (r["first_answer_s"], r["answer_median_s"], r["answer_max_s"]) == (9.0, 0.8, 0.9)
    assert r["answer_meets_target"] and r["added_meets_target"] and r["command"].startswith("sqlite3 ")
    table = cost_answer.format_cost(r)
    assert any("beyond the program's own runs | 2.2 s | at most 30 s" in line for line in table)
    assert cost_answer.format_cost(None) == []


def test_a_failing_command_is_a_one_line_error(monkeypatch):
    monkeypatch.setattr(cost_answer, "_timed",
                        lambda argv, **kw: (0.1, subprocess.CompletedProcess(argv, 2, "", "heapcost: error: bad\n")))
    with pytest.raises(HeapcostError, match="failed on its own"):
        cost_answer.cost_bench(answers=1, alone_runs=1)


def test_the_part_is_listed_and_tabulated():
    assert command.PARTS["cost"] == ("cost",)
    out = command.format_results({"cost": {"program": "p", "first_answer_s": 9.0, "answers": 3, "answer_median_s": 0.8,
                                           "answer_max_s": 0.9, "answer_target_s": 1.0, "profile_runs": 7,
                                           "program_wall_s": 0.2, "profile_wall_s": 3.0, "added_beyond_runs_s": 2.4,
                                           "added_target_s": 30.0}})
    assert "A cost prediction as a user gets it: p" in out
