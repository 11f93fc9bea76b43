"""A quiet machine: what else ran during a trial, and a campaign that will not start on a busy machine.

Per trial (or lockstep pair), /proc/stat is read before and after: the CPU time every process of the
machine used (user, nice, system, irq, softirq over all CPUs) minus the trial's own user+sys is the time
other processes took (`other_cpu_s`, the harness's own few milliseconds included); of it, the part on the
trial's own CPU is `cpu_other_s` (pinned trials only); the steal time is what the hypervisor gave to other
guests (`steal_s`). /proc/stat counts in clock ticks (10 ms here), so a short trial's figures are coarse but
unbiased over many trials.

A trial is flagged `interfered` when others used, on its own CPU, more than SAME_CPU_FRACTION of its wall
time, or, on the other CPUs, more than OTHER_CPUS_FRACTION; in either case more than that record's floor
(SAME_CPU_MIN_S, OTHER_CPUS_MIN_S: what quiet pairs record, tick noise). The thresholds come from `make
bench`'s interference part (bench/interference.py, bench/results.md), which measured how much other work of
known placement moves a lockstep pair's ratio: on the pair's own CPU, by about as much as the share it
takes; on the other CPU, by far less.

A campaign holds an fcntl lock on `<runs dir>/.campaign.lock` while it runs (removed when it ends), and refuses to start while
another holds it or while the 1-minute load average is above QUIET_LOAD; FORCE=1 runs anyway (recorded). It never
starts while /dev/null is not the null device: a program that replaces the file it is told to write (tcc, re2c
given `-o /dev/null`) leaves a regular file there, and every later write to "nowhere" then lands on the disk.
"""
import fcntl
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from analysis.errors import HeapcostError

QUIET_LOAD = 0.7  # 1-minute load average above which a campaign does not start (2 vCPUs here)
# From `make bench`'s interference part (bench/results.md; measured alone 2026-11-30 22:57-23:02 UTC, 6112
# pairs): the recorded share of a pair's wall time above which other work is expected to move its ratio by
# more than 0.25% (95% bound of a line through the quiet share), and the quiet pairs' 99th percentile of the
# record (tick noise). On the pair's own CPU a 10% load moved the ratio by +10%: any work there counts.
# On the other CPU every load measured moved it by 0.5-1.2%, not in proportion to its share: no share
# keeps it within 0.25%; the campaign lock and the quiet check before a campaign are what keep it out, and
# this threshold flags only heavy use.
SAME_CPU_FRACTION = 0.027
SAME_CPU_MIN_S = 0.011
OTHER_CPUS_FRACTION = 0.229
OTHER_CPUS_MIN_S = 0.013
LOCK_NAME = ".campaign.lock"
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class CpuTimes:
    busy_s: float  # user + nice + system + irq + softirq, all CPUs
    steal_s: float
    per_cpu: tuple = ()  # busy_s of cpu0, cpu1, ...


def _busy(fields: list[str]) -> tuple[float, float]:
    v = [int(x) for x in fields] + [0] * 10
    user, nice, system, _idle, _iowait, irq, softirq, steal = v[:8]
    return (user + nice + system + irq + softirq) / _TICK, steal / _TICK


def read_cpu(stat_text: str | None = None) -> CpuTimes | None:
    """The machine's CPU times now, in total and per CPU (None where /proc/stat cannot be read)."""
    if stat_text is None:
        try:
            stat_text = Path("/proc/stat").read_text()
        except OSError:
            return None
    total, per_cpu = None, {}
    for line in stat_text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            total = _busy(parts[1:])
        elif parts and parts[0].startswith("cpu") and parts[0][3:].isdigit():
            per_cpu[int(parts[0][3:])] = _busy(parts[1:])[0]
    if total is None:
        return None
    return CpuTimes(total[0], total[1], tuple(per_cpu.get(i, 0.0) for i in range(max(per_cpu, default=-1) + 1)))


def interference(before: CpuTimes | None, after: CpuTimes | None, own_cpu_s: float, wall_s: float,
                 cpu: int | None = None) -> dict:
    """The trial columns other_cpu_s, cpu_other_s (on the trial's CPU `cpu`), steal_s and interfered (empty
    when /proc/stat was unreadable; cpu_other_s also when the trial was not pinned)."""
    if before is None or after is None:
        return {"other_cpu_s": None, "steal_s": None, "interfered": None, "cpu_other_s": None}
    other = max(0.0, after.busy_s - before.busy_s - own_cpu_s)
    steal = max(0.0, after.steal_s - before.steal_s)
    same = None
    if cpu is not None and cpu < min(len(before.per_cpu), len(after.per_cpu)):
        same = min(other, max(0.0, after.per_cpu[cpu] - before.per_cpu[cpu] - own_cpu_s))
    return {"other_cpu_s": f"{other:.3f}", "steal_s": f"{steal:.3f}",
            "interfered": int(is_interfered(other, wall_s, same)),
            "cpu_other_s": None if same is None else f"{same:.3f}"}


def is_interfered(other_cpu_s: float, wall_s: float, cpu_other_s: float | None = None) -> bool:
    """Others' CPU time beyond the thresholds: on the trial's CPU (when known), or elsewhere. An unpinned
    trial shares every CPU with the harness, whose own work would trip the trial-CPU threshold in every
    trial: its whole record is judged by the other-CPU thresholds."""
    if cpu_other_s is None:
        return other_cpu_s > max(OTHER_CPUS_FRACTION * wall_s, OTHER_CPUS_MIN_S)
    elsewhere = max(0.0, other_cpu_s - cpu_other_s)
    return (cpu_other_s > max(SAME_CPU_FRACTION * wall_s, SAME_CPU_MIN_S)
            or elsewhere > max(OTHER_CPUS_FRACTION * wall_s, OTHER_CPUS_MIN_S))


def null_device_ok(path: Path = Path(os.devnull)) -> bool:
    """Whether `path` is a character device (the null device, as it should be)."""
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False


def is_forced(force) -> bool:
    """FORCE=1 / --force / the notebook parameter; unset: the environment's HEAPCOST_FORCE."""
    if force in (None, ""):
        force = os.environ.get("HEAPCOST_FORCE", "0")
    return str(force).strip().lower() in ("1", "true", "yes")


class CampaignLock:
    """Held for a campaign's life. Entering checks the machine; refuses with one line unless forced."""

    def __init__(self, runs_dir: Path, force=None, max_load: float = QUIET_LOAD, loadavg=None,
                 null_device: Path = Path(os.devnull)):
        self.path = Path(runs_dir) / LOCK_NAME
        self.null_device = Path(null_device)
        self.force = is_forced(force)
        self.max_load = max_load
        self._loadavg = loadavg or (lambda: os.getloadavg()[0])
        self._fh = None
        self.held = False
        self.record: dict = {}

    def __enter__(self):
        if not null_device_ok(self.null_device):
            raise HeapcostError(f"{self.null_device} is not the null device (a program replaced it with a file); "
                                f"restore it (rm {self.null_device}; mknod -m 666 {self.null_device} c 1 3) before measuring")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        load = self._loadavg()
        held = self._acquire()
        holder = ""
        if held:
            self._fh.seek(0)
            self._fh.truncate()
            self._fh.write(f"{os.getpid()}\n")
            self._fh.flush()
        else:
            self._fh.seek(0)
            holder = self._fh.read().strip()
        self.record = {"loadavg1": load, "max_load": self.max_load, "forced": self.force,
                       "lock": "held" if held else f"held by another campaign (pid {holder or '?'})"}
        if not self.force:
            if not held:
                self._release()
                raise HeapcostError(f"another campaign is running (pid {holder or '?'} holds {self.path}); "
                                    "wait for it, or FORCE=1 to measure anyway")
            if load > self.max_load:
                self._release()
                raise HeapcostError(f"the machine is busy (1-minute load {load:.2f} > {self.max_load:g}); "
                                    "stop other work and wait a minute, or FORCE=1 to measure anyway")
        return self

    def _acquire(self) -> bool:
        """Lock the file; True when held. The holder removes it when done (so no stray file is left in
        the runs directory): a lock won on a file already removed is retried on the new one."""
        for _ in range(10):
            self._fh = open(self.path, "a+")
            try:
                fcntl.flock(self._fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False
            try:
                if os.stat(self.path).st_ino == os.fstat(self._fh.fileno()).st_ino:
                    self.held = True
                    return True
            except FileNotFoundError:
                pass
            self._fh.close()
        return False

    def _release(self):
        if self._fh is not None:
            try:
                if self.held:
                    self.path.unlink(missing_ok=True)
                fcntl.flock(self._fh, fcntl.LOCK_UN)
            finally:
                self._fh.close()
                self._fh = None
                self.held = False

    def __exit__(self, *exc):
        self._release()
