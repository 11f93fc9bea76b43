"""Host identity and fingerprint (analysis/contract/host.py), on made-up machines and the published runs."""
import json

from conftest import REPO

from analysis.contract.host import (UNKNOWN_HOST, host_fingerprint, host_groups, host_identity, host_label,
                                    nominal_mhz)


def vm(model="AMD EPYC", mhz=2445.422, memory_kb=24684096, kernel="6.18.44-fc-v595", **cpu_extra):
    return {"kernel": kernel, "memory_kb": memory_kb,
            "cpu": {"model": model, "logical_cpus": 2, "cpuinfo_mhz": [mhz, mhz], "hypervisor_flag": True,
                    "constant_tsc": True, **cpu_extra}}


def test_reboot_noise_in_mhz_and_memory_keeps_the_fingerprint():
    assert host_fingerprint(vm()) == host_fingerprint(vm(mhz=2445.406, memory_kb=24684092))


def test_each_recorded_part_of_the_identity_changes_the_fingerprint():
    base = host_fingerprint(vm())
    assert host_fingerprint(vm(mhz=2596.118)) != base
    assert host_fingerprint(vm(kernel="6.18.44-fc-v657")) != base
    assert host_fingerprint(vm(model="Intel(R) Xeon(R) Processor")) != base
    assert host_fingerprint(vm(memory_kb=2 * 24684096)) != base
    assert host_fingerprint(vm(family=25)) != base
    assert host_fingerprint(vm(family=25, model_number=1, stepping=1)) != host_fingerprint(
        vm(family=25, model_number=1, stepping=0))
    more_cpus = vm()
    more_cpus["cpu"]["logical_cpus"] = 4
    assert host_fingerprint(more_cpus) != base
    bare = vm()
    bare["cpu"]["hypervisor_flag"] = False
    assert host_fingerprint(bare) != base


def test_bare_metal_takes_the_recorded_nominal_frequency_never_the_current_one():
    busy = {"model": "Intel Core i5-6500", "cpuinfo_mhz": [3591.2, 800.1], "hypervisor_flag": False}
    assert nominal_mhz(busy) is None
    assert nominal_mhz({**busy, "nominal_mhz": 3600.0}) == 3600
    assert nominal_mhz({**busy, "cpuinfo_mhz": [3200.0, 900.0], "nominal_mhz": 3600.0}) == 3600


def test_a_machine_json_without_cpu_or_memory_is_an_unknown_host():
    assert host_fingerprint({"error": "describe_machine failed: boom"}) == UNKNOWN_HOST
    assert host_fingerprint({}) == UNKNOWN_HOST
    ident = host_identity({"kernel": "6.1"})
    assert ident["kernel"] == "6.1" and ident["cpu_model"] is None
    assert host_fingerprint({"kernel": "6.1"}) != UNKNOWN_HOST


def test_the_label_says_what_the_host_is():
    assert host_label(host_identity(vm())) == "AMD EPYC 2450 MHz, 2 CPUs, 24 GiB, kernel 6.18.44-fc-v595, VM"


def test_the_published_runs_fall_into_one_host_kind_per_processor_and_kernel():
    """One kernel has run on two processors (Intel Xeon 2600 MHz and AMD EPYC 2445 MHz, both v1045): the kind
    of host follows the processor and the kernel together, never the kernel alone."""
    machines = sorted((REPO / "data" / "runs").glob("*/machine.json"))
    assert machines
    loaded = {path.parent.name: json.loads(path.read_text()) for path in machines}
    group, _ = host_groups(loaded)  # a newer run records more of its CPU and joins the older runs of its kind
    by_machine = {}
    for run, machine in loaded.items():
        cpu = machine.get("cpu") or {}
        mhz = round(float((cpu.get("cpuinfo_mhz") or [0])[0]) / 10)
        by_machine.setdefault((machine["kernel"], cpu.get("model"), mhz), set()).add(group[run])
    assert all(len(prints) == 1 for prints in by_machine.values()), by_machine
    assert len({p for prints in by_machine.values() for p in prints}) == len(by_machine) >= 5
    kernels = {kernel for kernel, _, _ in by_machine}
    assert len(kernels) < len(by_machine)  # a kernel seen on two processors is two kinds of host


CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC 7B13
stepping\t: 1
cpu MHz\t\t: 2445.422
flags\t\t: fpu hypervisor constant_tsc
"""


def test_new_runs_record_family_model_and_stepping_and_their_fingerprint(tmp_path):
    from analysis.harness.process.machine import cpu_info, with_host

    cpu = cpu_info(CPUINFO, sysfs_root=tmp_path)
    assert (cpu["model"], cpu["family"], cpu["model_number"], cpu["stepping"]) == ("AMD EPYC 7B13", 25, 1, 1)
    assert cpu["hypervisor_flag"] and cpu["nominal_mhz"] is None
    described = with_host({"kernel": "6.1.0", "memory_kb": 24684096, "cpu": cpu})
    assert described["host"]["identity"]["cpu_family"] == 25
    assert described["host"]["identity"]["nominal_mhz"] == 2450
    assert described["host"]["fingerprint"] == host_fingerprint(described)
    freq = tmp_path / "devices/system/cpu/cpu0/cpufreq"
    freq.mkdir(parents=True)
    (freq / "cpuinfo_max_freq").write_text("3500000\n")
    assert cpu_info(CPUINFO, sysfs_root=tmp_path)["nominal_mhz"] == 3500.0


def test_an_older_run_joins_the_one_newer_host_kind_that_agrees_with_what_it_records():
    from analysis.contract.host import host_groups

    old = vm(model="Intel(R) Xeon(R) Processor", mhz=2599.998, kernel="6.18.44-fc-v1045")
    new = vm(model="Intel(R) Xeon(R) Processor", mhz=2599.998, kernel="6.18.44-fc-v1045", family=6,
             model_number=167, stepping=1)
    elsewhere = vm(kernel="6.18.44-fc-v595")
    group, kinds = host_groups({"old": old, "new": new, "elsewhere": elsewhere})
    assert group["old"] == group["new"] == host_fingerprint(new) != group["elsewhere"]
    assert kinds[group["old"]]["cpu_stepping"] == 1 and len(kinds) == 2
    # two newer kinds that both agree with the old run (another stepping): it cannot tell, it stays apart
    other_stepping = vm(model="Intel(R) Xeon(R) Processor", mhz=2599.998, kernel="6.18.44-fc-v1045", family=6,
                        model_number=167, stepping=2)
    group, _ = host_groups({"old": old, "new": new, "other": other_stepping})
    assert group["old"] == host_fingerprint(old) and len(set(group.values())) == 3
    group, _ = host_groups({"error": {"error": "boom"}, "new": new})
    assert group["error"] == "unknown"


def test_a_processor_kind_leaves_the_machine_out_and_joins_a_run_that_did_not_record_its_family():
    from analysis.contract.host import processor_groups

    def machine(kernel, family=None, mhz=2596.1, model="AMD EPYC"):
        cpu = {"model": model, "logical_cpus": 2, "cpuinfo_mhz": [mhz, mhz], "hypervisor_flag": True}
        if family is not None:
            cpu.update(family=family, model_number=2, stepping=1)
        return {"kernel": kernel, "cpu": cpu, "memory_kb": 24 * 1024 * 1024}
    groups = processor_groups({"old": machine("v657"), "new": machine("v1098", family=26),
                               "other-mhz": machine("v595", mhz=2445.4), "intel": machine("v1045", 6, 2600.0, "Intel Xeon")})
    # another kernel is the same processor kind; the run without a family joins the one kind it agrees with
    assert groups["old"] == groups["new"] == "AMD EPYC 2600 MHz (26/2/1)"
    assert groups["other-mhz"] == "AMD EPYC 2450 MHz, family not recorded"
    assert groups["intel"] == "Intel Xeon 2600 MHz (6/2/1)"
    # two fuller kinds it agrees with: it keeps its own (nothing tells which)
    two = processor_groups({"old": machine("a"), "x": machine("b", family=25), "y": machine("c", family=26)})
    assert two["old"] == "AMD EPYC 2600 MHz, family not recorded"
    # the label it keeps is extended by each fuller kind's, and by no other processor's
    from analysis.contract.host import extends_label
    assert extends_label(two["x"], two["old"]) and extends_label(two["y"], two["old"])
    assert not extends_label(two["old"], two["x"]) and not extends_label(two["x"], two["y"])
    assert not extends_label(groups["intel"], two["old"]) and not extends_label(two["old"], two["old"])


def test_a_machine_is_one_boot_and_a_run_without_a_boot_falls_back_to_its_kind_and_kernel():
    from analysis.contract.host import boot_machine_id, canonical_label, machine_groups, machine_of

    def machine(kernel, boot=None, family=25):
        cpu = {"model": "AMD EPYC", "logical_cpus": 2, "cpuinfo_mhz": [2596.1], "hypervisor_flag": True,
               "family": family, "model_number": 17, "stepping": 1}
        return {"kernel": kernel, "cpu": cpu, "memory_kb": 24 * 1024 * 1024,
                **({"machine_id": boot_machine_id(boot)} if boot else {})}
    one, reboot = machine_of(machine("v1252", "boot-1")), machine_of(machine("v1252", "boot-2"))
    assert one.identified and one.kind == reboot.kind == "AMD EPYC 2600 MHz (25/17/1)" and one.id != reboot.id
    assert one == machine_of(machine("v1252", "boot-1")) and one.name.startswith("M-") and len(one.name) == 8
    # the hash never gives the boot id back, and an empty boot id is no machine
    assert "boot-1" not in one.id and boot_machine_id("") is None and boot_machine_id(" \n") is None
    legacy, legacy_again = machine_of(machine("v1147")), machine_of(machine("v1147"))
    assert not legacy.identified and legacy == legacy_again and legacy.name.startswith("K-")
    assert machine_of(machine("v1098")).id != legacy.id  # another kernel build: another machine
    # a run that did not record its family is a machine of the kind the dataset joins it to
    old = {"kernel": "v657", "cpu": {"model": "AMD EPYC", "logical_cpus": 2, "cpuinfo_mhz": [2596.1],
                                     "hypervisor_flag": True}}
    groups = machine_groups({"old": old, "new": machine("v1252", "b")})
    assert groups["old"].kind == groups["new"].kind and groups["old"].id != groups["new"].id
    # registrations made before a kind without its family read so named it by model and frequency alone
    assert canonical_label("AMD EPYC 2600 MHz") == "AMD EPYC 2600 MHz, family not recorded"
    assert canonical_label("AMD EPYC 2600 MHz (26/2/1)") == "AMD EPYC 2600 MHz (26/2/1)"


def test_machine_json_records_this_boot_as_a_hash(tmp_path):
    from analysis.harness.process import machine

    described = machine.describe_machine()
    boot = machine._read(machine.BOOT_ID, "")
    assert described["machine_id"] == (boot_machine_id_of(boot) if boot else None)


def boot_machine_id_of(boot):
    from analysis.contract.host import boot_machine_id

    return boot_machine_id(boot)
