"""A quiet machine: what else ran during a trial, and a campaign that will not start on a busy machine.

Per trial, /proc/stat is read before and after: the CPU time every process of the machine used (user,
nice, system, irq, softirq over all CPUs) minus the trial's own user+sys is the time other processes
took (`other_cpu_s`, the harness's own few milliseconds included), and the steal time is what the
hypervisor gave to other guests (`steal_s`). /proc/stat counts in clock ticks (10 ms here), so a short
trial's figures are coarse; a trial is flagged `interfered` when others used more than
INTERFERENCE_FRACTION of its wall time and more than INTERFERENCE_MIN_S (one tick is no evidence).

A campaign holds an fcntl lock on `<runs dir>/.campaign.lock` while it runs (removed when it ends), and refuses to start while
another holds it or while the 1-minute load average is above QUIET_LOAD; FORCE=1 runs anyway (recorded).
"""
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from analysis.errors import HeapcostError

QUIET_LOAD = 0.7  # 1-minute load average above which a campaign does not start (2 vCPUs here)
INTERFERENCE_FRACTION = 0.25
INTERFERENCE_MIN_S = 0.02
LOCK_NAME = ".campaign.lock"
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class CpuTimes:
    busy_s: float  # user + nice + system + irq + softirq, all CPUs
    steal_s: float


def read_cpu(stat_text: str | None = None) -> CpuTimes | None:
    """The machine's total CPU times now (None where /proc/stat cannot be read)."""
    if stat_text is None:
        try:
            stat_text = Path("/proc/stat").read_text()
        except OSError:
            return None
    for line in stat_text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            v = [int(x) for x in parts[1:]] + [0] * 10
            user, nice, system, _idle, _iowait, irq, softirq, steal = v[:8]
            return CpuTimes((user + nice + system + irq + softirq) / _TICK, steal / _TICK)
    return None


def interference(before: CpuTimes | None, after: CpuTimes | None, own_cpu_s: float, wall_s: float) -> dict:
    """The trial columns other_cpu_s, steal_s and interfered (empty when /proc/stat was unreadable)."""
    if before is None or after is None:
        return {"other_cpu_s": None, "steal_s": None, "interfered": None}
    other = max(0.0, after.busy_s - before.busy_s - own_cpu_s)
    steal = max(0.0, after.steal_s - before.steal_s)
    return {"other_cpu_s": f"{other:.3f}", "steal_s": f"{steal:.3f}",
            "interfered": int(is_interfered(other, wall_s))}


def is_interfered(other_cpu_s: float, wall_s: float) -> bool:
    return other_cpu_s > max(INTERFERENCE_FRACTION * wall_s, INTERFERENCE_MIN_S)


def is_forced(force) -> bool:
    """FORCE=1 / --force / the notebook parameter; unset: the environment's HEAPCOST_FORCE."""
    if force in (None, ""):
        force = os.environ.get("HEAPCOST_FORCE", "0")
    return str(force).strip().lower() in ("1", "true", "yes")


class CampaignLock:
    """Held for a campaign's life. Entering checks the machine; refuses with one line unless forced."""

    def __init__(self, runs_dir: Path, force=None, max_load: float = QUIET_LOAD, loadavg=None):
        self.path = Path(runs_dir) / LOCK_NAME
        self.force = is_forced(force)
        self.max_load = max_load
        self._loadavg = loadavg or (lambda: os.getloadavg()[0])
        self._fh = None
        self.held = False
        self.record: dict = {}

    def __enter__(self):
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
