"""The glibc builds (seed 004) in the catalogue, the harness, provisioning, the probes and the results.

The fast tests fake the cache folders (no build needed); the `allocators` ones need the three builds of
`make allocators` and skip with the availability reason when a build is absent."""
import csv
import hashlib
import json
import os
from pathlib import Path

import pytest

from analysis.errors import HeapcostError
from analysis.paths import portable_path
from analysis.harness.timing import lockstep
from analysis.harness.process import trial
from analysis.harness.security import probes
from analysis.harness.allocators import catalog, glibc_build, provision
from analysis.harness.process.launcher import _DEFAULTS, LaunchResult
from analysis.harness.workloads.builtin import WORKLOADS
from analysis.harness.workloads import supports

VERSION = "2.36-9+deb12u14"
VARIANTS = tuple(glibc_build.VARIANTS)
SYSTEM_LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


@pytest.fixture
def fake_builds(tmp_path, monkeypatch):
    """A cache holding finished-looking builds of every variant (stamp, elf/ld.so, libc.so.6)."""
    monkeypatch.setenv("HEAPCOST_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(glibc_build, "installed_source_version", lambda: VERSION)

    def finish(variant):
        folder = glibc_build.variant_dir(variant, VERSION)
        (folder / "build" / "elf").mkdir(parents=True)
        (folder / "build" / "elf" / "ld.so").write_text("")
        (folder / "build" / "libc.so.6").write_text("")
        stamp = {"variant": variant, "source_version": VERSION,
                 "configure_options": list(glibc_build.CONFIGURE_OPTIONS),
                 "patch_sha256": hashlib.sha256(glibc_build.patch_bytes(variant)).hexdigest(),
                 "build_seconds": 600.0, "built_at": "2099-01-01T00:00:00Z"}
        (folder / glibc_build.STAMP_NAME).write_text(json.dumps(stamp))
        return folder
    return finish


def resolved(variant):
    return catalog.resolve(catalog.load_catalog()[variant])


# ---------------------------------------------------------------------------------- the catalogue
def test_three_glibc_build_entries_claim_what_their_build_keeps():
    cat = catalog.load_catalog()
    assert "glibc-build" in catalog.ORIGIN_KINDS
    system = set(cat["glibc"].defences)
    for variant in VARIANTS:
        a = cat[variant]
        assert a.family == "glibc-built" and a.origin["kind"] == "glibc-build" and a.built_glibc
        assert a.preload == () and a.callgrind is True and a.variant == "glibc"
        assert (a.origin.get("patch") or None) == glibc_build.VARIANTS[variant]
        assert glibc_build.VARIANTS[variant] is None or glibc_build.VARIANTS[variant] in a.defences_ref
        assert not supports(a, "compile")  # cc1/as/ld run on the system glibc
        for w in WORKLOADS:
            # redis-server is the system's binary, linked with its own jemalloc: not run on a built glibc
            assert supports(a, w) == (w not in ("compile", "build", "linux-build", "redis")), (variant, w)
    assert set(cat["glibc-built"].defences) == system
    assert set(cat["glibc-no-tcache-key"].defences) == system - {"double-free-detect"}
    assert set(cat["glibc-no-safe-linking"].defences) == system - {"freelist-protect"}


@pytest.mark.parametrize("change, message", [
    ({"id": "glibc-nope"}, "not a glibc variant"),
    ({"origin": {"kind": "glibc-build", "patch": "no-safe-linking.patch"}}, "built with patch"),
    ({"preload": ["/x.so"]}, "preloads nothing"),
])
def test_a_glibc_build_entry_must_match_its_variant(tmp_path, change, message):
    entry = {"id": "glibc-no-tcache-key", "family": "glibc-built", "description": "d", "defences_ref": "r",
             "origin": {"kind": "glibc-build", "patch": "no-tcache-key.patch"}, **change}
    lines = ["[[allocator]]"] + [f"{k} = {json.dumps(v)}" if not isinstance(v, dict) else
                                 f"{k} = {{ " + ", ".join(f'{kk} = "{vv}"' for kk, vv in v.items()) + " }"
                                 for k, v in entry.items()]
    path = tmp_path / "cat.toml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(HeapcostError, match=message):
        catalog.load_catalog(path)


def test_a_built_variant_resolves_to_its_loader_and_its_own_libc(fake_builds):
    folders = {v: fake_builds(v) for v in VARIANTS}
    for variant, folder in folders.items():
        r = resolved(variant)
        assert r.available and r.reason == "" and r.preload == ()
        assert list(r.loader) == glibc_build.loader_argv(variant, VERSION)
        assert r.loader[0] == str(folder / "build" / "elf" / "ld.so")
        # the expected malloc is the variant's own folder: the system libc and the other variants fail
        assert r.expect_malloc == f"/{folder.name}/build/"
        assert trial.wrong_malloc([(str(folder / "build" / "libc.so.6"), "-")], r.expect_malloc) == ""
        assert trial.wrong_malloc([(SYSTEM_LIBC, "-")], r.expect_malloc)
        for other in set(VARIANTS) - {variant}:
            assert trial.wrong_malloc([(str(folders[other] / "build" / "libc.so.6"), "-")], r.expect_malloc)
    # an ordinary allocator has no loader and keeps its catalogue expectation
    glibc = resolved("glibc")
    assert glibc.loader == () and glibc.expect_malloc == "libc.so.6"


def test_an_unbuilt_variant_is_unavailable_with_the_reason(fake_builds, monkeypatch):
    monkeypatch.setattr(glibc_build, "missing_tools", lambda: [])
    r = resolved("glibc-no-tcache-key")
    not_built = "not built yet: `make allocators` builds it (about 10 minutes on 2 cores)"
    assert not r.available and r.reason == not_built and r.loader == ()
    monkeypatch.setattr(glibc_build, "missing_tools", lambda: ["gawk", "bison"])
    r = resolved("glibc-no-tcache-key")
    assert not r.available and r.reason == not_built  # provisioning installs the tools itself
    with pytest.raises(HeapcostError, match="glibc-no-tcache-key: not built yet: `make allocators` builds it"):
        catalog.select("glibc-no-tcache-key", catalog=catalog.load_catalog())


def test_allocators_command_lists_the_variants_with_their_availability(fake_builds, capsys, monkeypatch):
    from types import SimpleNamespace

    fake_builds("glibc-built")
    monkeypatch.setattr(glibc_build, "missing_tools", lambda: [])
    catalog.run(SimpleNamespace(extra="", available=False))
    lines = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines()}
    assert lines["glibc-built"].split()[2] == "yes" and "elf/ld.so" in lines["glibc-built"]
    assert lines["glibc-no-safe-linking"].split()[2] == "no"
    assert lines["glibc-no-safe-linking"].endswith("not built yet: `make allocators` builds it (about 10 minutes "
                                                   "on 2 cores)")


# ---------------------------------------------------------------------------------- the harness
def test_the_loader_goes_in_front_of_every_workload_but_compile(fake_builds):
    fake_builds("glibc-built")
    r = resolved("glibc-built")
    t = trial.SpeedTrial(r, WORKLOADS["python"], 0.01, env_target=0)
    plain = WORKLOADS["python"].argv(0.01, "glibc", {})
    assert t.argv == [*r.loader, *plain] and os.path.isabs(plain[0])
    env = t.env(Path("/tmp/x"), 0)
    assert env["LD_PRELOAD"].endswith("mallocwho.so") or "mallocwho" in env["LD_PRELOAD"].split()[-1]
    assert "HEAPCOST_WHO" in env and "LD_LIBRARY_PATH" not in env
    with pytest.raises(HeapcostError, match="cc1, as and ld"):
        trial.loader_argv(r.loader, ["gcc"], WORKLOADS["compile"])
    assert trial.loader_argv((), ["prog", "1"], WORKLOADS["compile"]) == ["prog", "1"]


def _who(workdir, *libs, pid=100):
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "who").write_text("".join(f"{pid}\t/exe\tmalloc={lib}\tfree={lib}\tPerl_malloced_size=-\n"
                                         for lib in libs))
    (workdir / "stdout").write_text("checksum=ab\n")


def test_the_resolution_check_refuses_the_system_libc_for_a_build(fake_builds, tmp_path):
    folder = fake_builds("glibc-built")
    t = trial.SpeedTrial(resolved("glibc-built"), WORKLOADS["python"], 0.01, env_target=0)
    ok = LaunchResult(status="exited", **{**_DEFAULTS, "exit_code": 0})
    _who(tmp_path / "a", str(folder / "build" / "libc.so.6"))
    # recorded without the machine's folders: the cache is {cache}, as in allocators.toml
    assert t.judge(ok, tmp_path / "a", "ab") == ("ok", "", portable_path(str(folder / "build" / "libc.so.6")))
    assert t.judge(ok, tmp_path / "a", "ab")[2].startswith("{cache}/allocators/")
    _who(tmp_path / "b", SYSTEM_LIBC)
    status, reason, lib = t.judge(ok, tmp_path / "b", "ab")
    assert status == "wrong-malloc" and folder.name in reason and lib == SYSTEM_LIBC


def test_under_callgrind_the_wrapper_images_are_not_judged(fake_builds, tmp_path):
    """valgrind's launcher script and binary run on the system glibc, then exec the tool in the same pid."""
    folder = fake_builds("glibc-built")
    built = str(folder / "build" / "libc.so.6")
    _who(tmp_path / "w", SYSTEM_LIBC, SYSTEM_LIBC, built)
    assert trial.read_who(tmp_path / "w" / "who", final_images_only=True) == [(built, "-")]
    assert len(trial.read_who(tmp_path / "w" / "who")) == 3
    ok = LaunchResult(status="exited", **{**_DEFAULTS, "exit_code": 0})
    r = resolved("glibc-built")
    timed = trial.SpeedTrial(r, WORKLOADS["python"], 0.01, env_target=0)
    counted = trial.SpeedTrial(r, WORKLOADS["python"], 0.01, env_target=0, mode="callgrind")
    assert timed.judge(ok, tmp_path / "w", "ab")[0] == "wrong-malloc"
    assert counted.judge(ok, tmp_path / "w", "ab")[0] == "ok"


def test_each_process_of_a_lockstep_pair_runs_through_its_own_loader(fake_builds):
    fake_builds("glibc-built")
    fake_builds("glibc-no-tcache-key")
    ra, rb = resolved("glibc-built"), resolved("glibc-no-tcache-key")
    wl = WORKLOADS["python"]
    ta, tb = trial.SpeedTrial(ra, wl, 0.01, 0), trial.SpeedTrial(rb, wl, 0.01, 0)
    cmd = lockstep.driver_command(ta, tb, (Path("/tmp/a"), Path("/tmp/b")), (0, 0), cpu=1, first="a",
                                  chunk_us=1000, timeout=None)
    split = len(cmd) - 1 - cmd[::-1].index("--")
    first = cmd.index("--")
    assert cmd[first + 1:split] == [*ra.loader, *wl.argv(0.01, "glibc", {})]
    assert cmd[split + 1:] == [*rb.loader, *wl.argv(0.01, "glibc", {})]
    assert any(c.startswith("LD_PRELOAD=") and "mallocwho" in c for c in cmd)


def test_a_probe_runs_as_its_own_program_with_the_resolution_check(fake_builds, monkeypatch, tmp_path):
    folder = fake_builds("glibc-no-safe-linking")
    target = probes.target_for(catalog.load_catalog()["glibc-no-safe-linking"])
    assert not target.unavailable and target.loader == resolved("glibc-no-safe-linking").loader
    assert target.expect_malloc == f"/{folder.name}/build/"
    seen = {}

    def fake_run(argv, *, env, stdout, stderr, **kw):
        seen["argv"], seen["env"] = argv, env
        Path(env["HEAPCOST_WHO"]).write_text(f"1\t/x\tmalloc={SYSTEM_LIBC}\tfree=x\n")
        Path(stdout).write_text("result worked=1 size=41\n")
        return LaunchResult(status="exited", **{**_DEFAULTS, "exit_code": 0})

    monkeypatch.setattr(probes.launcher, "run", fake_run)
    probe = probes.PROBES["overflow-16"]
    res = probes.run_once(probe, target, tmp_path / "probe-bin", 41)
    # the build's ld.so is the probe's interpreter (probe_build.binary_for), not a program in front of it
    assert seen["argv"] == [str(tmp_path / "probe-bin"), *probe.argv(41)]
    assert "mallocwho" in seen["env"]["LD_PRELOAD"]
    assert res.outcome == "n/a" and "wrong malloc" in res.detail  # the system libc is not the build's


# ---------------------------------------------------------------------------------- provisioning
class FakeApt:
    def __init__(self, ok=True):
        self.asked, self.ok = [], ok

    def ensure(self, names, why):
        self.asked.append(tuple(names))
        return self.ok, "not root: run `sudo apt-get install gawk bison`"


def test_provisioning_reports_builds_with_their_time_and_skips_them_without_build(fake_builds, monkeypatch,
                                                                                  tmp_path):
    from types import SimpleNamespace

    monkeypatch.setattr(glibc_build, "missing_tools", lambda: [])
    fake_builds("glibc-built")
    log = provision.Log(tmp_path / "log.txt", quiet=True)
    alloc = lambda v: SimpleNamespace(id=v, origin={"kind": "glibc-build"})  # noqa: E731
    ok, why = provision.provision_one(alloc("glibc-built"), FakeApt(), log, no_build=True)
    assert ok and "built in 600.0 s" in why
    ok, why = provision.provision_one(alloc("glibc-no-tcache-key"), FakeApt(), log, no_build=True)
    assert ok and why == "not built yet: `make allocators` builds it (about 10 minutes on 2 cores)"
    ok, why = provision.provision_one(alloc("glibc-no-tcache-key"), FakeApt(), log, dry_run=True)
    assert ok and why.startswith("would build glibc-no-tcache-key")
    # without gawk/bison (and not root): the build does not start, and the reason is given
    monkeypatch.setattr(glibc_build, "build", lambda *a, **k: pytest.fail("must not build"))
    apt = FakeApt(ok=False)
    ok, why = provision.provision_one(alloc("glibc-no-tcache-key"), apt, log)
    assert not ok and "gawk" in why and {"gawk", "bison"} <= set(apt.asked[0])
    built = {}
    monkeypatch.setattr(glibc_build, "build", lambda v: built.setdefault(v, fake_builds(v) / "build"))
    ok, why = provision.provision_one(alloc("glibc-no-tcache-key"), FakeApt(), log)
    assert ok and list(built) == ["glibc-no-tcache-key"] and "built in 600.0 s" in why
    rows = {a: (ok, why) for a, ok, why in provision.status([alloc(v) for v in VARIANTS])}
    assert rows["glibc-built"][0] and not rows["glibc-no-safe-linking"][0]
    assert rows["glibc-no-safe-linking"][1] == "not built yet: `make allocators` builds it (about 10 minutes on 2 cores)"


# ---------------------------------------------------------------------------------- results: seed 004
@pytest.mark.slow  # end to end, over 2.5 s on a 2-core host: in make test, not test-fast
def test_seed_004_is_answered_by_the_builds_once_they_are_measured(tmp_path):
    from simulated_dataset import add_time_run, make_dataset

    from analysis.publish.debates import questions
    from analysis.publish.results import comparisons

    data = make_dataset(tmp_path)
    truth = {"glibc": 1.0, "glibc-built": 1.0, "glibc-no-tcache-key": 0.96, "glibc-no-safe-linking": 0.99}
    add_time_run(data, "20990104T000000Z-time-sim", truth, seed=7, n_blocks=12)
    res = comparisons.compute(data)
    abl = res.ablation.set_index(["defence", "workload"])
    key = abl.loc[("tcache double-free key check", "small-loop")]
    assert key["allocator"] == "glibc-built" and key["base"] == "glibc-no-tcache-key"
    assert key["ci_low"] < 1 / 0.96 < key["ci_high"]
    linking = abl.loc[("safe-linking", "small-loop")]
    assert linking["base"] == "glibc-no-safe-linking" and linking["ci_low"] < 1 / 0.99 < linking["ci_high"]
    answer = questions.answer(res, res.figures).set_index("seed").loc["004"]
    assert answer["configuration"] == "glibc-built / glibc-no-tcache-key"
    assert answer["run_id"] == "20990104T000000Z-time-sim"
    assert answer["not_measured"] == "" and not answer["verdict"].startswith("no verdict")
    assert float(answer["ci_low"]) < 1 / 0.96 < float(answer["ci_high"])


# ---------------------------------------------------------------------------------- with the real builds
def need(*variants):
    for v in variants:
        ok, why = glibc_build.availability(v)
        if not ok:
            pytest.skip(f"{v}: {why}")


@pytest.mark.allocators
def test_a_smoke_campaign_runs_on_the_built_glibc(tmp_path, monkeypatch):
    need("glibc-built", "glibc-no-tcache-key")
    from conftest import cli

    runs = tmp_path / "runs"
    monkeypatch.setenv("HEAPCOST_RUNS_DIR", str(runs))
    out = cli("measure", "--profile", "smoke", "--allocators", "glibc-built,glibc-no-tcache-key",
              "--workloads", "small-loop,python", "--blocks", "1", "--force", "--protocol", "trials",
              env_extra={"HEAPCOST_RUNS_DIR": str(runs)})
    assert out.returncode == 0, out.stderr
    [trials] = list(runs.glob("*/trials.csv"))
    with open(trials, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {(r["allocator"], r["workload"]) for r in rows} == {
        (a, w) for a in ("glibc-built", "glibc-no-tcache-key") for w in ("small-loop", "python")}
    for r in rows:
        assert r["status"] == "ok", r
        folder = glibc_build.variant_dir(r["allocator"]).name
        assert f"/{folder}/build/libc.so.6" in r["malloc_lib"], r


@pytest.mark.allocators
def test_a_lockstep_pair_of_two_builds_on_small_loop():
    need("glibc-built", "glibc-no-tcache-key")
    wl = WORKLOADS["small-loop"]
    wl.prepare("glibc")
    expected = trial.reference_checksum(wl, 0.01, "glibc", 60)  # from the system glibc
    ta = trial.SpeedTrial(resolved("glibc-built"), wl, 0.01, 0, timeout_s=60)
    tb = trial.SpeedTrial(resolved("glibc-no-tcache-key"), wl, 0.01, 0, timeout_s=60)
    row = lockstep.run_pair(ta, tb, expected_a=expected, expected_b=expected, cpu=os.cpu_count() - 1,
                            timeout=60)
    assert row["status"] == "ok", row["reason"]
    assert float(row["active_a_s"]) > 0 and float(row["active_b_s"]) > 0
    assert "/glibc-built-" in row["malloc_lib_a"] and "/glibc-no-tcache-key-" in row["malloc_lib_b"]


@pytest.mark.allocators
@pytest.mark.valgrind
def test_callgrind_counts_the_program_run_through_the_loader():
    need("glibc-built", "glibc-no-tcache-key")
    from analysis.harness.mechanisms import callgrind

    wl = WORKLOADS["small-loop"]
    wl.prepare("glibc")
    expected = trial.reference_checksum(wl, 0.01, "glibc", 60)
    info = {"expected_checksums": {f"small-loop|glibc|{0.01:.6g}": expected}}
    counts = {}
    for variant in ("glibc-built", "glibc-no-tcache-key"):
        t = trial.SpeedTrial(resolved(variant), wl, 0.01, 0, mode="callgrind", timeout_s=600)
        out = callgrind._measure_one(t, info, "small-loop")
        assert out["status"] == "ok", out
        assert f"/{glibc_build.variant_dir(variant).name}/" in out["malloc_lib"]
        counts[variant] = out["instructions"]
    frees = callgrind.count_calls(wl, 0.01, 60)["free_calls"]
    # the program itself is counted (40,000 malloc/free pairs at this scale), and the key check costs
    # instructions on every free
    assert counts["glibc-no-tcache-key"] > 20 * frees
    assert counts["glibc-built"] > counts["glibc-no-tcache-key"]


@pytest.mark.allocators
def test_the_tcache_double_free_is_caught_only_with_the_key_check():
    need(*VARIANTS)
    cat = catalog.load_catalog()
    probe = probes.PROBES["double-free"]
    targets = {v: probes.target_for(cat[v]) for v in VARIANTS}
    outcome = {v: probes.run_once(probe, t, probes.binary_for(probe.source, t)) for v, t in targets.items()}
    built = outcome["glibc-built"]
    assert built.outcome == "caught" and "double free detected in tcache" in built.detail
    assert outcome["glibc-no-safe-linking"].outcome == "caught"
    assert outcome["glibc-no-tcache-key"].outcome == "missed"
    assert outcome["glibc-no-tcache-key"].values.get("worked") == "1"
    poison = probes.PROBES["freelist-poison"]
    nsl, built = targets["glibc-no-safe-linking"], targets["glibc-built"]
    assert probes.run_once(poison, nsl, probes.binary_for(poison.source, nsl)).values.get("worked") == "1"
    assert probes.run_once(poison, built, probes.binary_for(poison.source, built)).outcome == "caught"
