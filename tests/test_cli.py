"""The command line a newcomer types first: every --help prints help and exits 0, under the name it was run by."""
import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from analysis import cli
from analysis.harness.allocators import catalog
from conftest import REPO


def run_in_process(capsys, argv, prog="heapcost"):
    """(exit status, stdout, stderr) of cli.main, whether it returns or argparse exits."""
    try:
        status = cli.main(argv, prog=prog)
    except SystemExit as exc:
        status = exc.code
    out, err = capsys.readouterr()
    return status, out, err


def listed_commands(out: str) -> list[str]:
    """The commands the top-level help lists, in its order (a stage's first line names the stage first)."""
    listing = out.split("the work, in order", 1)[1].splitlines()[1:]
    names = []
    for line in listing:
        words = line[len("  ") + 9:].split()  # past the stage column
        if words:
            names.append(words[0])
    return names


@pytest.mark.parametrize("argv", [[], ["--help"], ["-h"]], ids=["bare", "--help", "-h"])
def test_top_level_help_lists_the_users_commands_in_the_order_of_the_work(capsys, argv):
    status, out, err = run_in_process(capsys, argv)
    assert status == 0 and err == ""
    assert out.startswith("usage: heapcost ")
    listed = listed_commands(out)
    internal = set(cli.STAGES["internal"])
    assert listed == [c for c in cli.COMMANDS if c not in internal]
    assert not internal & set(out.split())  # fleet-job, notebook and bench run under make and Snakemake
    stages = [line.split()[0] for line in out.split("the work, in order", 1)[1].splitlines()[1:]
              if line.startswith("  ") and not line.startswith("   ")]
    assert stages == ["set", "measure", "look", "publish", "share"]
    assert listed.index("measure") < listed.index("show") < listed.index("paper") < listed.index("merge")
    assert "95% confidence intervals" in " ".join(out.split())  # the help that once ended in a TypeError


def test_an_internal_command_still_runs(capsys):
    status, out, _ = run_in_process(capsys, ["notebook", "--help"])
    assert status == 0 and out.split()[:3] == ["usage:", "heapcost", "notebook"]


def test_show_prints_one_runs_host_and_cells(capsys, tmp_path):
    run = tmp_path / "20260101T000000Z-time-quick"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"run_id": run.name, "kind": "time", "status": "complete",
                                              "started_utc": "2026-01-01T00:00:00Z", "ended_utc": "2026-01-01T00:06:00Z",
                                              "elapsed_s": 360, "allocators": ["glibc", "jemalloc"],
                                              "workloads": ["small-loop"], "params": {"profile": "quick"}}))
    (run / "machine.json").write_text(json.dumps({"kernel": "6.1.0", "cpu": {"model": "Some CPU", "logical_cpus": 2,
                                                                              "cpuinfo_mhz": [2600.0, 2600.0]}}))
    header = "seq,block,workload,allocator,scale,status,wall_s,maxrss_kb,reason"
    rows = [f"{i},{i // 2},small-loop,{a},1,ok,{0.5 + i / 100},1000," for i, a in enumerate(["glibc", "jemalloc"] * 3)]
    (run / "trials.csv").write_text("\n".join([header, *rows]) + "\n")
    status, out, err = run_in_process(capsys, ["show", str(run)])
    assert status == 0, err
    assert "20260101T000000Z-time-quick (time, complete)" in out and "(6.0 min)" in out
    assert "Some CPU 2600 MHz, kernel 6.1.0, 2 CPUs" in out and "2 allocators, 1 workloads" in out
    assert [line.split()[:3] for line in out.splitlines() if line.strip().startswith("small-loop")] == \
        [["small-loop", "glibc", "3"], ["small-loop", "jemalloc", "3"]]


def test_show_prints_a_profile_runs_workloads_with_their_calls(capsys, tmp_path):
    run = tmp_path / "20260101T000000Z-profile-workloads"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"run_id": run.name, "kind": "profile", "status": "complete",
                                              "params": {"workloads": ["small-loop"], "scale": 0.25, "timed_runs": 5}}))
    rows = [("processes", "", 1), ("malloc_calls", "", 1000), ("malloc_calls", 32, 1000), ("reuse_share", "", 0.8),
            ("user_s", "", 0.125)]
    (run / "profiles.csv").write_text("run_id,workload,scale,quantity,size_class,value\n" + "".join(
        f"{run.name},small-loop,0.25,{q},{c},{v}\n" for q, c, v in rows))
    status, out, err = run_in_process(capsys, ["show", str(run)])
    assert status == 0, err
    assert "(profile, complete)" in out and "1 workloads profiled at scale 0.25, 5 timed runs each" in out
    assert [line.split() for line in out.splitlines() if line.strip().startswith("small-loop")] == \
        [["small-loop", "1", "1000", "0.8", "0.125"]]


def test_show_of_something_that_is_no_run_is_one_line(capsys, tmp_path):
    status, out, err = run_in_process(capsys, ["show", str(tmp_path)])
    assert status == 2 and err.count("\n") == 1 and "no run.json there" in err


@pytest.mark.parametrize("command", list(cli.COMMANDS))
def test_every_command_prints_its_help(capsys, command):
    status, out, err = run_in_process(capsys, [command, "--help"])
    assert status == 0 and err == "", err
    assert out.split()[:3] == ["usage:", "heapcost", command]
    assert "options:" in out and "-h, --help" in out
    assert cli.COMMANDS[command][1] in " ".join(out.split())  # the one-line help is the description


def test_help_text_is_printed_literally_whatever_percent_signs_it_holds():
    parser = argparse.ArgumentParser(prog="heapcost", formatter_class=cli.LiteralHelpFormatter)
    parser.add_argument("--share", help="at most 5% of the pairs; %d, %s and %(default)s stay as written")
    text = " ".join(parser.format_help().split())
    assert "at most 5% of the pairs; %d, %s and %(default)s stay as written" in text


def test_an_unknown_command_is_a_usage_error(capsys):
    status, out, err = run_in_process(capsys, ["no-such-command"])
    assert status == 2 and out == ""
    assert "heapcost: error: argument COMMAND: invalid choice: 'no-such-command'" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("argv0, prog", [
    ("/somewhere/.venv/bin/heapcost", "heapcost"),
    ("heapcost", "heapcost"),
    ("/somewhere/analysis/__main__.py", "python -m analysis"),
    ("", "python -m analysis"),
])
def test_usage_names_the_program_as_it_was_run(argv0, prog):
    assert cli.invoked_as(argv0) == prog


def _run(argv):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, env=env, timeout=120)


def test_python_dash_m_analysis_help_in_a_fresh_process():
    for argv in ([], ["--help"], ["compare-pairs", "--help"]):
        proc = _run([sys.executable, "-m", "analysis", *argv])
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        assert proc.stdout.startswith("usage: python -m analysis ")


def test_the_heapcost_entry_point_prints_help_under_its_own_name():
    script = Path(sys.executable).parent / "heapcost"
    if not script.is_file():
        pytest.skip("no `heapcost` script next to this Python: `make venv` installs it (pip install -e .)")
    for argv in (["--help"], ["allocators", "--help"]):
        proc = _run([str(script), *argv])
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        assert proc.stdout.startswith("usage: heapcost ")


# ------------------------------------------------------------- what `heapcost allocators` says is missing
def _catalogue_entry(ident, kind, package, preload=(), interpreters=None):
    return catalog.Allocator(id=ident, family=ident, description=ident, preload=tuple(preload),
                             origin={"kind": kind, "package": package}, interpreters=interpreters or {})


def test_allocators_says_what_is_not_here_yet_and_the_step_that_brings_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HEAPCOST_CACHE", str(tmp_path / "cache"))
    # a finished build of tcmalloc-built whose library has gone: the reason shows where it was looked for
    build = tmp_path / "cache" / "allocators" / "tcmalloc-built-1.0"
    build.mkdir(parents=True)
    (build / "BUILD.json").write_text(json.dumps({"allocator": "tcmalloc-built", "source_version": "1.0",
                                                  "verification": {"ok": True}}))
    entries = [
        _catalogue_entry("jemalloc", "debian", "libjemalloc2", [str(tmp_path / "libjemalloc.so.2")]),
        _catalogue_entry("mimalloc-secure", "debian-source", "mimalloc",
                         ["{cache}/allocators/mimalloc-secure-*/lib/libmimalloc-secure.so*"]),
        _catalogue_entry("perl-mymalloc", "debian-source", "perl",
                         interpreters={"perl": "{cache}/allocators/perl-mymalloc-*/bin/perl"}),
        _catalogue_entry("mimalloc3", "pypi", "cmeel-mimalloc", ["{venv}/no-such-dir/libmimalloc.so*"]),
        _catalogue_entry("tcmalloc-built", "debian-source", "gperftools",
                         ["{cache}/allocators/tcmalloc-built-*/lib/libtcmalloc.so*"]),
    ]
    monkeypatch.setattr(catalog, "load_catalog", lambda: {e.id: e for e in entries})
    assert cli.main(["allocators"], prog="heapcost") == 0
    out = capsys.readouterr().out
    why = {line.split()[0]: " ".join(line.split()[3:]) for line in out.splitlines()[1:]}
    assert why["jemalloc"] == ("not installed yet: `make allocators` installs the Debian package libjemalloc2 "
                               f"({tmp_path / 'libjemalloc.so.2'})")
    assert why["mimalloc-secure"] == "not built yet: `make allocators` builds it from the Debian source of mimalloc"
    assert why["perl-mymalloc"] == "not built yet: `make allocators` builds it from the Debian source of perl"
    assert why["mimalloc3"].startswith("not installed yet: `make venv` installs cmeel-mimalloc")
    venv = Path(sys.prefix)
    assert f"{venv.relative_to(REPO) if venv.is_relative_to(REPO) else venv}/no-such-dir" in why["mimalloc3"]
    # the cache as ~/...: probe runs record the reason, and the dataset names no home folder
    assert why["tcmalloc-built"] == ("not found: ~/cache/allocators/tcmalloc-built-*/lib/libtcmalloc.so* (the build "
                                     "lacks it: `python -m analysis provision --only tcmalloc-built --force`)")
    assert "{" not in out  # no placeholder of the catalogue is printed unexpanded


# ------------------------------------------------------------- make help and the README name every parameter
def _makefile_parameters(target: str) -> set:
    """The variables a make target's recipe passes on, but for the Makefile's own (`NAME :=`)."""
    text = (REPO / "Makefile").read_text()
    own = set(re.findall(r"^([A-Z_]+) :=", text, re.M))
    recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", text, re.M).group(1)
    return set(re.findall(r"\$\(([A-Z_]+)\)", recipe)) - own


@pytest.mark.parametrize("target", ["measure", "probe", "fleet", "contribute", "merge"])
def test_make_help_and_the_readme_name_every_parameter_of(target):
    text = (REPO / "Makefile").read_text()
    help_lines = "\n".join(re.findall(r'^\t@echo "(.*)"$', re.search(r"^help:.*\n((?:\t.*\n)+)", text, re.M)
                                      .group(1), re.M))
    readme = (REPO / "README.md").read_text() + (REPO / "docs" / "measuring.md").read_text()
    parameters = _makefile_parameters(target)
    assert parameters, f"no parameters found in the {target} recipe"
    assert [p for p in sorted(parameters) if f"{p}=" not in help_lines] == []
    assert [p for p in sorted(parameters) if not re.search(rf"`{p}`|\b{p}=", readme)] == []


def test_the_readme_is_short_and_its_docs_pages_name_only_targets_that_exist():
    readme = (REPO / "README.md").read_text()
    assert len(readme) <= 10_000
    targets = set(re.findall(r"^([a-z][a-z-]*):", (REPO / "Makefile").read_text(), re.M))
    for page in ["README.md"] + re.findall(r"\]\((docs/[\w.-]+\.md)\)", readme):
        text = (REPO / page).read_text()
        named = set(re.findall(r"`make ([a-z][a-z-]*)", text))
        assert named - targets == set(), f"{page} names make targets that do not exist: {named - targets}"
