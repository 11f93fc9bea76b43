"""The plan `make debates` prints first (analysis/harness/fleet/plan.py): what this machine is to the dataset,
in four cases, and what the host lacks, dropped library by library instead of stopping."""
import json

from conftest import REPO
from analysis.contract.host import boot_machine_id
from analysis.harness.fleet import plan

PUBLISHED = REPO / "data" / "runs" / "20261204T135007Z-time-quick" / "machine.json"


def runs_with(tmp_path, *machines):
    runs = tmp_path / "runs"
    for i, m in enumerate(machines):
        (runs / f"r{i}").mkdir(parents=True)
        (runs / f"r{i}" / "machine.json").write_text(json.dumps(m))
    return runs


def machine(boot=None, family=25, kernel="6.18.44-fc-v1252"):
    m = json.loads(PUBLISHED.read_text())
    m["cpu"] = {**m["cpu"], "family": family}
    m["kernel"] = kernel
    m.pop("machine_id", None)
    if boot:
        m["machine_id"] = boot_machine_id(boot)
    return m


def test_the_plan_tells_a_new_kind_a_new_machine_a_known_machine_and_an_unidentified_one_apart(tmp_path):
    published = runs_with(tmp_path, machine("boot-a"), machine(None, kernel="6.18.44-fc-v1147"))
    assert plan.this_host(published, machine("boot-b"))[1] == plan.NEW_MACHINE
    assert plan.this_host(published, machine("boot-a"))[1] == plan.KNOWN_MACHINE
    assert plan.this_host(published, machine(None))[1] == plan.UNIDENTIFIED
    assert plan.this_host(published, machine("boot-c", family=26))[1] == plan.NEW_KIND
    # a reboot is a new machine, on the same kernel too
    label, case = plan.this_host(runs_with(tmp_path / "x", machine("boot-a")), machine("boot-a2"))
    assert case == plan.NEW_MACHINE and "machine M-" in label


def test_a_host_without_the_brought_libraries_still_measures_what_it_has(tmp_path):
    runs = runs_with(tmp_path, machine("boot-a"))
    have = {"glibc", "mozjemalloc", "mozjemalloc-poison", "glibc-built", "glibc-no-tcache-key"}
    lines, ready = plan.plan("debates", environ={}, out_dir=tmp_path / "out", runs_dir=runs,
                             machine=machine("boot-b"), have=lambda wanted: {n: (n in have, "not built yet")
                                                                             for n in wanted})
    assert ready
    text = "\n".join(lines)
    # seeds 002 and 004 and the A/A cell run; the campaigns of the brought libraries are skipped
    assert "  todo pairs-1" in text and "  skip hardened-1" in text and "  skip perl-1" in text
    dropped = [line for line in lines if line.startswith("    dropped ")]
    assert len(dropped) == len({line.split(":")[0] for line in dropped})  # one line a library
    om = next(line for line in dropped if line.startswith("    dropped omalloc-1.128:"))
    assert "$OM is not set" in om and "1.128" in om and "--provenance omalloc-1.128" in om
    minutes = int(lines[1].split("about ")[1].split(" minutes")[0])
    assert minutes == sum(c.minutes for c in plan.load_profile("debates") if c.name.startswith("pairs"))


def test_the_primary_cells_take_at_most_an_hour_of_machine_time():
    assert sum(c.minutes for c in plan.load_profile("debates")) <= 60


def test_make_debates_builds_only_what_a_campaign_that_can_run_here_needs():
    lib = str(REPO / "README.md")  # any file stands for a brought library here
    without = plan.recipe_allocators("debates", environ={})
    assert "glibc-built" in without and "mozjemalloc-poison_l5" in without
    assert "perl-mymalloc" not in without  # perl's campaign needs OpenBSD's malloc brought: skipped anyway
    brought = plan.recipe_allocators("debates", environ={"OMALLOC_1299": lib})
    assert "perl-mymalloc" in brought and "perl-sysmalloc" in brought


def test_the_plan_names_a_too_low_map_count_for_the_brought_libraries_it_was_given(tmp_path, monkeypatch):
    lib = tmp_path / "libhardened_malloc.so"
    lib.write_bytes(b"\x7fELF")
    low = tmp_path / "max_map_count"
    low.write_text("65530\n")
    check = plan.brought.check_map_count
    monkeypatch.setattr(plan.brought, "check_map_count", lambda allocators: check(allocators, path=low))
    hardened = next(c for c in plan.load_profile("debates") if c.name == "hardened-1")
    environ = {"HM": f"hardened-72fb357={lib}"}
    lines = plan.map_count_lines(hardened, environ)
    assert len(lines) == 1 and "vm.max_map_count is 65530" in lines[0] and "sysctl -w" in lines[0]
    low.write_text("1048576\n")
    assert plan.map_count_lines(hardened, environ) == []
