"""The fleet (workflow/Snakefile, analysis/harness/fleet/campaigns.py): profiles, the job a campaign becomes, and the
whole workflow for real, through Snakemake's local executor and through its Slurm executor on a one-node
cluster on the loopback interface (tests/slurm_cluster.py; up to the merge), each in a copy of the checkout."""
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import REPO, SMALL_PUBLISHED_RUNS, copy_checkout, keep_only_runs
from analysis.errors import HeapcostError
from analysis.contract import contribution, run_check
from analysis.harness.fleet import campaigns
from slurm_cluster import FEATURE, SNAKEMAKE_POLLING_OFTEN, loopback_cluster, missing_daemons

SNAKEMAKE = Path(sys.executable).with_name("snakemake")


def write_profile(folder, text):
    folder.mkdir(exist_ok=True)
    (folder / "p.toml").write_text(text)
    return folder


def test_every_shipped_profile_loads_and_names_only_known_commands():
    names = campaigns.profile_names()
    assert {"smoke", "quick", "debates"} <= set(names)
    for name in names:
        for c in campaigns.load_profile(name):
            assert c.command in campaigns.COMMANDS and c.minutes > 0


@pytest.mark.parametrize("text, message", [
    ('[[campaign]]\nname = "t"\ncommand = "bench"\n', "command 'bench' is not one of"),
    ('[[campaign]]\nname = "t"\ncommand = "probe"\nparams = { WORKLOADS = "x" }\n', "unknown parameter"),
    ('[[campaign]]\nname = "t"\ncommand = "mechanism"\nparams = { PROFILE = "quick" }\n', "takes SIZES, BLOCKS"),
    ('[[campaign]]\nname = "t"\ncommand = "profile"\nparams = { SIZES = "16" }\n', "takes WORKLOADS, SCALE, RUNS"),
    ('[[campaign]]\nname = "T t"\ncommand = "probe"\n', "campaign name"),
    ('[[campaign]]\nname = "t"\ncommand = "probe"\n[[campaign]]\nname = "t"\ncommand = "measure"\n', "share a name"),
    ('title = "nothing"\n', "no \\[\\[campaign\\]\\]"),
    ('[[campaign]]\nname = "t"\ncommand = "measure"\nparams = { PROTOCOL = "trials", BLOCKS = "4" }\n',
     "BLOCKS 4 gives each cell fewer trials than the 5"),
    ('[[campaign\n', "not valid TOML"),
])
def test_a_bad_profile_is_one_error_naming_the_problem(tmp_path, text, message):
    with pytest.raises(HeapcostError, match=message):
        campaigns.load_profile("p", write_profile(tmp_path, text))


def test_a_campaign_becomes_the_command_make_would_run_with_the_nodes_variables():
    env = {"HM": "hardened-x=/opt/hm.so"}
    measure = campaigns.Campaign("t", "callgrind", {"PROFILE": "quick", "EXTRA_ALLOCATORS": "${HM},c=/l.so"})
    assert campaigns.command_line(measure, "py", env) == [
        "py", "-m", "analysis", "notebook", "measure", "PROFILE=quick", "EXTRA_ALLOCATORS=hardened-x=/opt/hm.so,c=/l.so",
        "MODE=callgrind"]
    probe = campaigns.Campaign("p", "probe", {"ALLOCATORS": "glibc", "RUNS": "2", "EXTRA_ALLOCATORS": "$HM"})
    assert campaigns.command_line(probe, "py", env) == [
        "py", "-m", "analysis", "probe", "--allocators", "glibc", "--runs", "2", "--extra-allocators", "hardened-x=/opt/hm.so"]
    mechanism = campaigns.Campaign("m", "mechanism", {"BLOCKS": "40"})
    assert campaigns.command_line(mechanism, "py", env) == ["py", "-m", "analysis", "mechanism", "--blocks", "40"]
    profile = campaigns.Campaign("w", "profile", {"WORKLOADS": "linux-build", "SCALE": "1"})
    assert campaigns.command_line(profile, "py", env) == ["py", "-m", "analysis", "profile", "--workloads",
                                                          "linux-build", "--scale", "1"]
    with pytest.raises(HeapcostError, match=r"\$OM, which is not set on this node"):
        campaigns.command_line(campaigns.Campaign("t", "measure", {"EXTRA_ALLOCATORS": "$OM"}), "py", env)


def fake_campaign(published_run, status="complete", returncode=0, runs=1):
    """A runner standing in for the campaign: copies a published run into HEAPCOST_RUNS_DIR."""
    def runner(argv, env, cwd):
        for n in range(runs):
            target = Path(env["HEAPCOST_RUNS_DIR"]) / (published_run.name + ("" if n == 0 else f"-{n}"))
            shutil.copytree(published_run, target)
            info = json.loads((target / "run.json").read_text())
            info.update(status=status, run_id=target.name)
            (target / "run.json").write_text(json.dumps(info))
        return SimpleNamespace(returncode=returncode)
    return runner


def test_a_job_packs_the_one_run_its_campaign_made(tmp_path):
    published = REPO / "data" / "runs" / "20261130T135001Z-time-quick"
    archive = tmp_path / "h" / "time.heapcost-run.tar.gz"
    c = campaigns.Campaign("time", "measure", {"PROFILE": "smoke"})
    assert campaigns.run_job(c, archive, runner=fake_campaign(published), wait=lambda: 0) == archive
    run_id, _ = contribution.unpack(archive, tmp_path / "unpacked")
    made = tmp_path / "h" / "time.heapcost-run.tar.gz.d" / "runs" / published.name
    assert run_id == published.name and run_check.run_files(tmp_path / "unpacked") == run_check.run_files(made)
    with pytest.raises(HeapcostError, match="failed \\(exit 3\\)"):
        campaigns.run_job(c, tmp_path / "x" / "a.tar.gz", runner=fake_campaign(published, returncode=3), wait=lambda: 0)
    with pytest.raises(HeapcostError, match="left 0 new complete runs"):
        campaigns.run_job(c, tmp_path / "y" / "a.tar.gz", runner=fake_campaign(published, status="running"), wait=lambda: 0)
    with pytest.raises(HeapcostError, match="left 2 new complete runs"):
        campaigns.run_job(c, tmp_path / "z" / "a.tar.gz", runner=fake_campaign(published, runs=2), wait=lambda: 0)


def test_a_job_waits_for_the_load_left_by_the_job_before_it_to_fall():
    loads, slept = iter([1.9, 1.2, 0.9, 0.6, 0.3]), []
    current = {"load": next(loads)}

    def sleep(s):
        slept.append(s)
        current["load"] = next(loads)
    # it waits for headroom below the campaign's own threshold: starting the campaign adds load
    assert campaigns.wait_for_quiet(lambda: current["load"], sleep) == 4 * campaigns.QUIET_POLL_S
    assert campaigns.wait_for_quiet(lambda: 0.1, sleep) == 0
    # a machine that stays busy is waited for no longer than the limit; the campaign's own check then refuses
    assert campaigns.wait_for_quiet(lambda: 2.0, lambda s: None, limit_s=20) == 20


@pytest.mark.parametrize("text, message", [
    ('[[campaign]]\nname = "t"\ncommand = "probe"\nruns = 0\n', "runs must be a whole number"),
    ('[[campaign]]\nname = "t"\ncommand = "probe"\nruns = "2"\n', "runs must be a whole number"),
])
def test_a_bad_runs_count_is_one_error(tmp_path, text, message):
    with pytest.raises(HeapcostError, match=message):
        campaigns.load_profile("p", write_profile(tmp_path, text))


def test_runs_asks_for_that_many_distinct_jobs_of_one_campaign(tmp_path):
    text = '[[campaign]]\nname = "t"\ncommand = "measure"\nruns = 3\nminutes = 4\nparams = { PAIRS = "debates" }\n'
    jobs = campaigns.load_profile("p", write_profile(tmp_path, text))
    assert [j.name for j in jobs] == ["t-1", "t-2", "t-3"] and {j.minutes for j in jobs} == {4}
    assert campaigns.command_line(jobs[0], "py", {})[-1] == "PAIRS=debates"


@pytest.mark.slow  # reads the published dataset or runs a command end to end: in make test, not test-fast
def test_the_local_executor_refuses_to_pretend_one_machine_is_several(tmp_path):
    r = subprocess.run([str(SNAKEMAKE), "-n", "-s", str(REPO / "workflow" / "Snakefile"), "-d", str(tmp_path),
                        "--config", "hosts=a,b", "profile=smoke", "executor=local"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode != 0 and "the local executor runs on this machine only" in r.stdout + r.stderr


MERGED = Path("build") / "fleet" / "smoke" / "merged.txt"


def run_workflow(clone, executor, hosts, env, targets=()):
    env = {k: v for k, v in env.items() if k not in ("HEAPCOST_RUNS_DIR",)}
    env.update(PYTHONPATH=str(clone), HEAPCOST_FORCE="1")
    snakemake = [sys.executable, "-c", SNAKEMAKE_POLLING_OFTEN] if executor == "slurm" else [str(SNAKEMAKE)]
    return subprocess.run([*snakemake, "-s", "workflow/Snakefile", *map(str, targets), "--workflow-profile",
                           f"workflow/executors/{executor}", "--config", f"hosts={hosts}", "profile=smoke", f"executor={executor}",
                           "paper_args=--notebooks="], cwd=clone, env=env, capture_output=True, text=True,
                          timeout=900)


def check_fleet_landed(clone, host, result):
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    merged = (clone / MERGED).read_text().splitlines()
    names = [c.name for c in campaigns.load_profile("smoke")]
    assert len(merged) == len(names) and all(line.endswith(": added") for line in merged)
    described = {r["path"] for r in json.loads((clone / "data" / "datapackage.json").read_text())["resources"]}
    for line in merged:
        run_id = line.split(":")[0]
        run = clone / "data" / "runs" / run_id
        assert json.loads((run / "run.json").read_text())["status"] == "complete"
        archive = clone / "build" / "fleet" / "smoke" / host / f"{run_id.split('-')[1].replace('security', 'probe')}.heapcost-run.tar.gz"
        with tarfile.open(archive) as tar:
            manifest = json.loads(tar.extractfile(contribution.MANIFEST).read())
        assert manifest["machine"] == json.loads((run / "machine.json").read_text())  # its host, as measured
        assert f"runs/{run_id}/machine.json" in described


def check_paper_rendered(clone):
    assert (clone / MERGED).with_name("paper.done").is_file()
    numbers = json.loads((clone / "paper" / "generated" / "paper_numbers.json").read_text())
    assert (clone / "paper" / "paper.pdf").stat().st_size > 0 and numbers["dataset"]["sha256"]


@pytest.mark.slow
@pytest.mark.allocators
@pytest.mark.paper
def test_the_smoke_fleet_through_the_local_executor_lands_in_the_dataset(tmp_path):
    clone = copy_checkout(tmp_path / "clone")
    keep_only_runs(clone, SMALL_PUBLISHED_RUNS)  # the paper at the end: of these and the new runs only
    check_fleet_landed(clone, "local", run_workflow(clone, "local", "local", os.environ))
    check_paper_rendered(clone)


@pytest.mark.slow
@pytest.mark.allocators
@pytest.mark.paper
def test_the_smoke_fleet_through_slurm_on_a_loopback_cluster_lands_in_the_dataset(tmp_path):
    missing = missing_daemons()
    assert not missing, f"Slurm and munge are needed (.ci/run installs them): {', '.join(missing)} missing"
    clone = copy_checkout(tmp_path / "clone")
    keep_only_runs(clone, SMALL_PUBLISHED_RUNS)
    with loopback_cluster(tmp_path / "slurm") as env:
        # up to the merge: the paper rule after it is a local rule, the same under either executor, and the
        # local executor's test renders it
        result = run_workflow(clone, "slurm", FEATURE, env, targets=[MERGED])
        jobs = subprocess.run(["squeue", "-h", "--states=all", "-o", "%T|%N|%f|%h"], env=env, capture_output=True,
                              text=True).stdout.split()
    check_fleet_landed(clone, FEATURE, result)
    # one job per campaign, each on the host it named and alone on it (--exclusive: oversubscribe NO)
    assert sorted(jobs) == ["COMPLETED|loopback|loopback|NO"] * len(campaigns.load_profile("smoke")), jobs


def test_a_brought_library_is_named_the_published_build_or_another(tmp_path):
    from analysis.harness.allocators import brought

    run = tmp_path / "runs" / "R1"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"params": {"brought_libraries": {
        "hardened-72fb357": {"library": "lib.so", "library_sha256": "a" * 64}}}}))
    published = brought.published_builds(tmp_path / "runs")
    assert published == {"hardened-72fb357": {"a" * 64}}
    assert brought.build_report("hardened-72fb357", "a" * 64, published).endswith("the published build (sha256 aaaaaaaaaaaa)")
    assert "another build than the published one(s) (sha256 bbbbbbbbbbbb; published aaaaaaaaaaaa)" in \
        brought.build_report("hardened-72fb357", "b" * 64, published)
    assert "no run of the dataset" in brought.build_report("omalloc-1.128_l4", "c" * 64, published)


def test_a_recipe_build_is_named_the_published_build_from_the_runs_allocator_records(tmp_path):
    from analysis.harness.allocators import brought

    run = tmp_path / "runs" / "R2"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"allocators": {
        "glibc-built_l3": {"libraries": [{"allocator": "glibc-built_l3", "file": "libc.so", "sha256": "d" * 64}]},
        "perl-mymalloc": {"libraries": [{"allocator": "perl-mymalloc", "file": "perl", "sha256": "e" * 64},
                                        {"allocator": "someone-else", "file": "x.so", "sha256": "f" * 64}]},
        "glibc-built": {"libraries": []}}}))
    published = brought.published_builds(tmp_path / "runs")
    assert published == {"glibc-built_l3": {"d" * 64}, "perl-mymalloc": {"e" * 64}}
    assert brought.build_report("glibc-built_l3", "d" * 64, published).endswith("the published build (sha256 dddddddddddd)")
    assert "another build" in brought.build_report("glibc-built_l3", "0" * 64, published)


CONTESTED = {("mozjemalloc-poison", "mozjemalloc"), ("omalloc-1.128", "omalloc-1.128-getrbyte"),
             ("perl-omalloc", "perl-mymalloc")}


def built(*names):
    return lambda wanted: {n: (n in names, "built" if n in names else "not built yet") for n in wanted}


def test_a_host_without_a_brought_library_runs_the_rest_of_its_campaign_and_says_what_it_dropped(tmp_path):
    lib = tmp_path / "libcopy.so"
    lib.write_text("")
    c = campaigns.Campaign("pairs", "measure", {"PROFILE": "quick", "ALLOCATORS": "glibc,mozjemalloc,mozjemalloc-poison,"
                                                 "mozjemalloc_l2,mozjemalloc-poison_l2",
                                                 "EXTRA_ALLOCATORS": f"$OM,glibc-copy={lib}"})
    kept, dropped = campaigns.available(c, {}, built("glibc", "mozjemalloc", "mozjemalloc-poison"), CONTESTED)
    assert kept.params["ALLOCATORS"] == "glibc,mozjemalloc,mozjemalloc-poison"
    assert kept.params["EXTRA_ALLOCATORS"] == f"glibc-copy={lib}"
    names = [d.name for d in dropped]
    # every library the unset variable stands for, by name, and each recipe build this host lacks
    assert names[:10] == list(campaigns.VARIABLE_NAMES["OM"]) and names[10:] == ["mozjemalloc_l2", "mozjemalloc-poison_l2"]
    assert dropped[0].reason == "$OM is not set on this host" and dropped[-1].reason == "not built yet"
    # with everything here nothing is dropped and the campaign is the one the profile gives
    om = ",".join(f"{n}={lib}" for n in campaigns.VARIABLE_NAMES["OM"])
    same, none = campaigns.available(c, {"OM": om}, built(*c.params["ALLOCATORS"].split(",")), CONTESTED)
    assert same is c and none == []


def test_a_campaign_left_without_its_contested_pair_is_skipped_and_one_that_never_had_one_is_not(tmp_path):
    perl = campaigns.Campaign("perl", "measure", {"ALLOCATORS": "glibc,perl-mymalloc,perl-sysmalloc",
                                                  "EXTRA_ALLOCATORS": "perl-omalloc=$OMALLOC_1299"})
    skipped, dropped = campaigns.available(perl, {}, built("glibc", "perl-mymalloc", "perl-sysmalloc"), CONTESTED)
    assert skipped is None and [d.name for d in dropped] == ["perl-omalloc"]
    gone = tmp_path / "gone.so"
    skipped, dropped = campaigns.available(perl, {"OMALLOC_1299": str(gone)}, built("glibc", "perl-mymalloc"), CONTESTED)
    assert skipped is None and {d.name: d.reason for d in dropped} == {
        "perl-omalloc": "its library is not there", "perl-sysmalloc": "not built yet"}
    plain = campaigns.Campaign("time", "measure", {"ALLOCATORS": "glibc,jemalloc,scudo"})
    kept, dropped = campaigns.available(plain, {}, built("glibc", "jemalloc"), CONTESTED)
    assert kept.params["ALLOCATORS"] == "glibc,jemalloc" and [d.name for d in dropped] == ["scudo"]


def test_the_run_records_what_its_job_dropped(tmp_path):
    from analysis.harness.timing.measure import DROPPED_ENV, dropped_by_fleet

    seen = {}
    published = REPO / "data" / "runs" / "20261130T135001Z-time-quick"
    runner = fake_campaign(published)

    def recording(argv, env, cwd):
        seen.update(env)
        return runner(argv, env, cwd)
    lib = tmp_path / "libh.so"
    lib.write_text("")
    c = campaigns.Campaign("time", "measure", {"PROFILE": "smoke", "ALLOCATORS": "glibc",
                                               "EXTRA_ALLOCATORS": f"$HM,hardened-2026062800={lib}"})
    campaigns.run_job(c, tmp_path / "h" / "t.tar.gz", environ={}, runner=recording, wait=lambda: 0)
    assert [d["name"] for d in dropped_by_fleet(seen)] == list(campaigns.VARIABLE_NAMES["HM"])
    assert dropped_by_fleet({}) == []
    with pytest.raises(HeapcostError, match=DROPPED_ENV):
        dropped_by_fleet({DROPPED_ENV: "{"})
