"""What is known of the machine and its clock (machine.json), and locking the clock where it can be."""
import glob
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

CPUFREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq")


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


def cpu_info() -> dict:
    text = _read("/proc/cpuinfo", "")
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    flags = re.search(r"^flags\s*:\s*(.+)$", text, re.M)
    mhz = re.findall(r"^cpu MHz\s*:\s*([\d.]+)$", text, re.M)
    flag_set = set(flags.group(1).split()) if flags else set()
    return {
        "model": model.group(1) if model else platform.processor(),
        "logical_cpus": os.cpu_count(),
        "cpuinfo_mhz": [float(m) for m in mhz],
        "hypervisor_flag": "hypervisor" in flag_set,
        "constant_tsc": "constant_tsc" in flag_set,
    }


def clock_info() -> dict:
    """Governor, frequencies and boost where cpufreq exposes them; says so where it does not."""
    info = {"cpufreq_exposed": CPUFREQ.is_dir()}
    if CPUFREQ.is_dir():
        for key in ("scaling_governor", "scaling_driver", "scaling_min_freq", "scaling_max_freq",
                    "scaling_cur_freq", "cpuinfo_min_freq", "cpuinfo_max_freq"):
            info[key] = _read(CPUFREQ / key)
    info["boost"] = _read("/sys/devices/system/cpu/cpufreq/boost")
    info["intel_no_turbo"] = _read("/sys/devices/system/cpu/intel_pstate/no_turbo")
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


def describe_machine(packages=()) -> dict:
    mem = re.search(r"MemTotal:\s*(\d+)", _read("/proc/meminfo", "") or "")
    return {
        "kernel": platform.release(),
        "os": _read("/etc/debian_version") and f"Debian {_read('/etc/debian_version')}",
        "arch": platform.machine(),
        "cpu": cpu_info(),
        "memory_kb": int(mem.group(1)) if mem else None,
        "clock": clock_info(),
        "glibc": platform.libc_ver()[1],
        "python": sys.version.split()[0],
        "gcc": (_run(["gcc", "-dumpfullversion"])[1] or None),
        "aslr": _read("/proc/sys/kernel/randomize_va_space"),
        "transparent_hugepage": _read("/sys/kernel/mm/transparent_hugepage/enabled"),
        "vm_max_map_count": _read("/proc/sys/vm/max_map_count"),
        "loadavg_at_start": _read("/proc/loadavg"),
        "packages": package_versions(packages),
    }


def loadavg1() -> float | None:
    text = _read("/proc/loadavg")
    return float(text.split()[0]) if text else None


class ClockLock:
    """LOCK_CLOCK=1: pin every CPU's governor to performance and min=max frequency, restore on exit.

    Where cpufreq is absent (most VMs) or not writable, it records why it could not and does nothing.
    """

    def __init__(self, wanted: bool):
        self.wanted = wanted
        self.saved: dict[str, str] = {}
        self.outcome = "not requested"

    def __enter__(self):
        if not self.wanted:
            return self
        cpus = sorted(glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq"))
        if not cpus:
            self.outcome = "could not lock: cpufreq is not exposed on this machine (e.g. a VM)"
            return self
        try:
            for cpu in cpus:
                maxf = _read(f"{cpu}/cpuinfo_max_freq")
                for key, value in (("scaling_governor", "performance"), ("scaling_max_freq", maxf),
                                   ("scaling_min_freq", maxf)):
                    path = f"{cpu}/{key}"
                    self.saved[path] = _read(path)
                    Path(path).write_text(str(value))
            boost = "/sys/devices/system/cpu/cpufreq/boost"
            if os.path.exists(boost):
                self.saved[boost] = _read(boost)
                Path(boost).write_text("0")
            self.outcome = f"locked {len(cpus)} CPUs to performance at cpuinfo_max_freq, boost off"
        except OSError as exc:
            self.outcome = f"could not lock: {exc}"
            self._restore()
        return self

    def _restore(self):
        for path, value in reversed(list(self.saved.items())):
            try:
                if value is not None:
                    Path(path).write_text(value)
            except OSError:
                pass
        self.saved.clear()

    def __exit__(self, *exc):
        self._restore()
