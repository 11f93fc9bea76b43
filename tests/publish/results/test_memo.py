"""Results remembered by what they were computed from: a hit for the same bytes, arguments and code, a miss
for anything else, the warnings said again, and a broken stored file computed again."""
import pandas as pd
import pytest

from analysis import errors
from analysis.publish.results import memo


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setattr(memo, "MEMO_DIR", tmp_path / "memo")
    monkeypatch.delenv("HEAPCOST_MEMO", raising=False)
    return tmp_path / "memo"


def counting(value, warning=None):
    calls = []

    def compute():
        calls.append(1)
        if warning:
            errors.warn(warning)
        return value
    return compute, calls


def test_the_same_table_and_arguments_are_read_back_with_their_warnings(store, capsys):
    table = pd.DataFrame({"workload": ["a", "b"], "wall_s": [1.0, 2.0]})
    compute, calls = counting({"ratio": 1.5}, warning="run X is left out")
    assert memo.remembered("t", (table, "glibc"), compute) == {"ratio": 1.5}
    assert "run X is left out" in capsys.readouterr().err
    assert memo.remembered("t", (table.copy(), "glibc"), compute) == {"ratio": 1.5}
    assert len(calls) == 1
    assert "heapcost: warning: run X is left out" in capsys.readouterr().err
    assert len(list(store.rglob("*.pickle"))) == 1


def test_a_side_computations_warnings_kept_quiet_are_neither_printed_nor_remembered_outside(store, capsys):
    """A result that reads another remembered one for a side quantity keeps that one's warnings to itself, on
    the first computation and when both are read back."""
    inner, _ = counting(1.0, warning="probe run P is left out")

    def outer():
        with errors.recording(echo=False) as kept:
            value = memo.remembered("inner", ("x",), inner)
        assert kept == ["probe run P is left out"]
        errors.warn("the profile is outside the checked range")
        return value

    for _ in range(2):
        assert memo.remembered("outer", ("y",), outer) == 1.0
        err = capsys.readouterr().err
        assert "probe run P" not in err and err.count("outside the checked range") == 1


@pytest.mark.parametrize("change", ["value", "column", "dtype", "argument", "name"])
def test_any_change_of_the_inputs_computes_again(store, change):
    table = pd.DataFrame({"workload": ["a", "b"], "wall_s": [1.0, 2.0]})
    compute, calls = counting(1)
    memo.remembered("t", (table, "glibc"), compute)
    other, arg, name = table.copy(), "glibc", "t"
    if change == "value":
        other.loc[1, "wall_s"] = 2.0000000001
    elif change == "column":
        other = other.rename(columns={"wall_s": "user_s"})
    elif change == "dtype":
        other["wall_s"] = other["wall_s"].astype("float32")
    elif change == "argument":
        arg = "jemalloc"
    else:
        name = "u"
    memo.remembered(name, (other, arg), compute)
    assert len(calls) == 2


def test_a_folder_is_keyed_by_its_files_bytes(store, tmp_path):
    folder = tmp_path / "data"
    (folder / "runs").mkdir(parents=True)
    (folder / "runs" / "trials.csv").write_text("a,b\n1,2\n")
    compute, calls = counting("x")
    memo.remembered("f", (folder,), compute)
    memo.remembered("f", (folder,), compute)
    (folder / "runs" / "trials.csv").write_text("a,b\n1,3\n")
    memo.remembered("f", (folder,), compute)
    assert len(calls) == 2


def test_a_change_of_the_code_computes_again(store, monkeypatch):
    compute, calls = counting(1)
    memo.remembered("t", ("x",), compute)
    monkeypatch.setattr(memo, "code_digest", lambda: "another version of the code")
    memo.remembered("t", ("x",), compute)
    assert len(calls) == 2


def test_off_computes_every_time_and_a_broken_file_is_computed_again(store, monkeypatch):
    compute, calls = counting(1)
    monkeypatch.setenv("HEAPCOST_MEMO", "0")
    memo.remembered("t", ("x",), compute)
    memo.remembered("t", ("x",), compute)
    assert len(calls) == 2 and not store.exists()
    monkeypatch.delenv("HEAPCOST_MEMO")
    memo.remembered("t", ("x",), compute)
    [stored] = store.rglob("*.pickle")
    stored.write_bytes(b"not a pickle")
    assert memo.remembered("t", ("x",), compute) == 1
    assert len(calls) == 4
    assert memo.remembered("t", ("x",), compute) == 1 and len(calls) == 4


def test_a_table_pandas_cannot_hash_is_keyed_by_its_text(store):
    compute, calls = counting(1)
    memo.remembered("t", (pd.DataFrame({"cells": [[1, 2], [3]]}),), compute)
    memo.remembered("t", (pd.DataFrame({"cells": [[1, 2], [3]]}),), compute)
    memo.remembered("t", (pd.DataFrame({"cells": [[1, 2], [4]]}),), compute)
    assert len(calls) == 2


def test_whether_a_result_is_kept_is_known_before_reading_it(store, monkeypatch):
    compute, calls = counting(2.0)
    assert not memo.kept("k", ("x",))
    memo.remembered("k", ("x",), compute)
    assert memo.kept("k", ("x",)) and not memo.kept("k", ("y",))
    monkeypatch.setenv("HEAPCOST_MEMO", "0")
    assert not memo.kept("k", ("x",))
