"""What is known of the machine and its clock (machine.json), and locking the clock where it can be."""
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

from analysis.contract.host import boot_machine_id, fingerprint_of_identity, host_identity
from analysis.harness.process.clock_lock import ClockLock  # noqa: F401  (the harness's name for it)

CPU_SYSFS = Path("devices/system/cpu")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def _read(path, default=None):
    try:
        return Path(path).read_text().strip()
    except OSError:
        return default


def _run(cmd, timeout=20):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, (p.stdout + p.stderr).strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return None, str(exc)


def _cpuinfo_int(text, key):
    found = re.search(rf"^{key}\s*:\s*(\d+)\s*$", text, re.M)
    return int(found.group(1)) if found else None


def cpu_info(cpuinfo_text=None, sysfs_root="/sys") -> dict:
    """The processor as /proc/cpuinfo and cpufreq describe it (family/model number/stepping where x86 says)."""
    text = _read("/proc/cpuinfo", "") if cpuinfo_text is None else cpuinfo_text
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    flags = re.search(r"^flags\s*:\s*(.+)$", text, re.M)
    mhz = re.findall(r"^cpu MHz\s*:\s*([\d.]+)$", text, re.M)
    flag_set = set(flags.group(1).split()) if flags else set()
    max_khz = _read(Path(sysfs_root) / CPU_SYSFS / "cpu0/cpufreq/cpuinfo_max_freq")
    return {
        "model": model.group(1) if model else platform.processor(),
        "family": _cpuinfo_int(text, "cpu family"),
        "model_number": _cpuinfo_int(text, "model"),
        "stepping": _cpuinfo_int(text, "stepping"),
        # the nominal frequency where cpufreq tells it (cpuinfo MHz is the current one on bare metal)
        "nominal_mhz": int(max_khz) / 1000 if max_khz and max_khz.isdigit() else None,
        "logical_cpus": os.cpu_count(),
        "cpuinfo_mhz": [float(m) for m in mhz],
        "hypervisor_flag": "hypervisor" in flag_set,
        "constant_tsc": "constant_tsc" in flag_set,
    }


def clock_info(sysfs_root="/sys") -> dict:
    """Governor, frequencies and boost where cpufreq exposes them; says so where it does not."""
    cpu_dir = Path(sysfs_root) / CPU_SYSFS
    cpufreq = cpu_dir / "cpu0/cpufreq"
    info = {"cpufreq_exposed": cpufreq.is_dir()}
    if cpufreq.is_dir():
        for key in ("scaling_governor", "scaling_driver", "scaling_min_freq", "scaling_max_freq",
                    "scaling_cur_freq", "cpuinfo_min_freq", "cpuinfo_max_freq"):
            info[key] = _read(cpufreq / key)
    info["boost"] = _read(cpu_dir / "cpufreq/boost")
    info["intel_no_turbo"] = _read(cpu_dir / "intel_pstate/no_turbo")
    info["intel_min_perf_pct"] = _read(cpu_dir / "intel_pstate/min_perf_pct")
    info["intel_max_perf_pct"] = _read(cpu_dir / "intel_pstate/max_perf_pct")
    code, out = _run(["systemd-detect-virt"]) if shutil.which("systemd-detect-virt") else (None, "")
    info["virtualization"] = out if code == 0 else ("hypervisor flag set" if cpu_info()["hypervisor_flag"] else "none detected")
    info["perf_counters"] = perf_counters()
    return info


def perf_counters() -> str:
    if not shutil.which("perf"):
        return "perf not installed"
    code, out = _run(["perf", "stat", "-x,", "-e", "instructions", "true"])
    if code != 0 or "not supported" in out or "<not" in out:
        return "not supported"
    return "available"


def package_versions(packages) -> dict:
    versions = {}
    for pkg in sorted(set(packages)):
        code, out = _run(["dpkg-query", "-W", "-f=${Version}", pkg])
        versions[pkg] = out if code == 0 and out else None
    return versions


def with_host(machine: dict) -> dict:
    """machine.json's description with the host identity and its fingerprint (analysis/contract/host.py)."""
    identity = host_identity(machine)
    return {**machine, "host": {"identity": identity, "fingerprint": fingerprint_of_identity(identity)}}


def describe_machine(packages=()) -> dict:
    mem = re.search(r"MemTotal:\s*(\d+)", _read("/proc/meminfo", "") or "")
    sysfs_root = os.environ.get("HEAPCOST_SYSFS_ROOT") or "/sys"
    return with_host({
        "kernel": platform.release(),
        # this boot's identity (a reboot is a new machine): a hash, never the boot id itself
        "machine_id": boot_machine_id(_read(BOOT_ID, "")),
        "os": _read("/etc/debian_version") and f"Debian {_read('/etc/debian_version')}",
        "arch": platform.machine(),
        "cpu": cpu_info(sysfs_root=sysfs_root),
        "memory_kb": int(mem.group(1)) if mem else None,
        "clock": clock_info(sysfs_root),
        "glibc": platform.libc_ver()[1],
        "python": sys.version.split()[0],
        "gcc": (_run(["gcc", "-dumpfullversion"])[1] or None),
        "aslr": _read("/proc/sys/kernel/randomize_va_space"),
        "transparent_hugepage": _read("/sys/kernel/mm/transparent_hugepage/enabled"),
        "vm_max_map_count": _read("/proc/sys/vm/max_map_count"),
        "loadavg_at_start": _read("/proc/loadavg"),
        "packages": package_versions(packages),
    })


def record_clock_lock(machine_json: Path, record: dict):
    """Append one session's clock lock (ClockLock.record()) to machine.json's `clock_lock` list."""
    from analysis.contract import runstore

    described = json.loads(Path(machine_json).read_text())
    described.setdefault("clock_lock", []).append(record)
    runstore.write_json_atomic(Path(machine_json), described)


def loadavg1() -> float | None:
    text = _read("/proc/loadavg")
    return float(text.split()[0]) if text else None
