"""Locking the CPU clock for a campaign where the machine allows it, and putting every setting back after.

What is locked follows pyperf's `system tune`: boost off (AMD and acpi-cpufreq: cpufreq/boost = 0;
intel_pstate: no_turbo = 1 and min_perf_pct = max_perf_pct = 100), every CPU's cpufreq governor set to
`performance`, and its minimum frequency raised to its maximum (both to cpuinfo_max_freq read after boost is
off). Unlike `system tune` + `system reset`, which writes defaults back, the lock restores the values it
found, byte for byte.

Every exit restores them: a normal one, an exception in the harness, SIGINT, SIGTERM and SIGHUP (turned
into `Terminated`, a KeyboardInterrupt, while the lock is held, so the harness unwinds as on Ctrl-C). A
hard crash (SIGKILL, power loss) cannot run code: the original values are saved to a state file before the
first write, and the next ClockLock (locking or not) restores them from it and says so.

The sysfs root and the state file are parameters (tests use a fake tree); the environment variables
HEAPCOST_SYSFS_ROOT and HEAPCOST_CLOCK_STATE set them for a whole campaign.
"""
import json
import os
import signal
import threading
from pathlib import Path

SIGNALS = (signal.SIGTERM, signal.SIGHUP)
CPU_DIR = Path("devices/system/cpu")
BOOST = CPU_DIR / "cpufreq/boost"
INTEL_PSTATE = CPU_DIR / "intel_pstate"


class Terminated(KeyboardInterrupt):
    """A termination signal arrived while the clock was locked."""

    def __init__(self, signum: int):
        super().__init__(f"terminated by signal {signal.Signals(signum).name}")
        self.signum = signum


def default_state_file() -> Path:
    if os.environ.get("HEAPCOST_CLOCK_STATE"):
        return Path(os.environ["HEAPCOST_CLOCK_STATE"])
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "heapcost" / "clock-lock.json"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ClockLock:
    """Context manager: with wanted=True, lock the clock (record() says how, or why it could not)."""

    def __init__(self, wanted: bool, sysfs_root=None, state_file=None):
        self.wanted = wanted
        self.root = Path(sysfs_root or os.environ.get("HEAPCOST_SYSFS_ROOT") or "/sys")
        self.state_file = Path(state_file) if state_file else default_state_file()
        self.saved: list[tuple[str, str]] = []   # (path relative to the root, original raw content)
        self.locked: dict[str, str] = {}
        self.outcome = "not requested"
        self.crash_recovery = None
        self.restore_problems: list[str] = []
        self._old_handlers = {}
        self._wrote_state = False

    # ------------------------------------------------------------------ files
    def _path(self, rel) -> Path:
        return self.root / rel

    def _read(self, rel) -> str | None:
        try:
            return self._path(rel).read_text()
        except OSError:
            return None

    def _set(self, rel, value: str):
        """Save the original (once) and persist the saved state before writing the new value."""
        rel = str(rel)
        if not any(r == rel for r, _ in self.saved):
            original = self._read(rel)
            if original is None:
                raise OSError(f"cannot read {rel}")
            self.saved.append((rel, original))
            self._write_state()
        self._path(rel).write_text(value)
        self.locked[rel] = value

    def _write_state(self):
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_name(self.state_file.name + ".tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "sysfs_root": str(self.root), "saved": self.saved}))
        os.replace(tmp, self.state_file)
        self._wrote_state = True

    # ------------------------------------------------------------------ crash recovery
    def _recover(self) -> bool:
        """Restore what a crashed lock left; False when a live process holds the lock."""
        try:
            state = json.loads(self.state_file.read_text())
        except FileNotFoundError:
            return True
        except (OSError, ValueError) as exc:
            self.crash_recovery = f"unreadable clock-lock state file left as it is: {exc}"
            return False
        if state.get("pid") != os.getpid() and _pid_alive(int(state.get("pid", 0))):
            self.crash_recovery = f"another process (pid {state['pid']}) holds the clock lock"
            return False
        problems = self._restore_pairs([tuple(p) for p in state.get("saved", [])], Path(state["sysfs_root"]))
        self.state_file.unlink(missing_ok=True)
        self.crash_recovery = (f"restored {len(state.get('saved', []))} setting(s) a crashed run "
                               f"(pid {state.get('pid')}) had left locked"
                               + (f"; could not restore: {'; '.join(problems)}" if problems else ""))
        return True

    @staticmethod
    def _restore_pairs(saved, root: Path) -> list[str]:
        problems = []
        for rel, original in reversed(saved):
            try:
                (root / rel).write_text(original)
                if (root / rel).read_text().strip() != original.strip():
                    problems.append(f"{rel} reads {(root / rel).read_text().strip()!r} after restoring")
            except OSError as exc:
                problems.append(f"{rel}: {exc}")
        return problems

    # ------------------------------------------------------------------ locking
    def _cpufreq_dirs(self) -> list[str]:
        cpus = sorted((self.root / CPU_DIR).glob("cpu[0-9]*/cpufreq"), key=lambda p: int(p.parent.name[3:]))
        return [str(p.relative_to(self.root)) for p in cpus if p.is_dir()]

    def _lock(self) -> str:
        done = []
        if self._path(BOOST).exists():
            self._set(BOOST, "0")
            done.append("boost off")
        if self._path(INTEL_PSTATE).is_dir():
            if self._path(INTEL_PSTATE / "no_turbo").exists():
                self._set(INTEL_PSTATE / "no_turbo", "1")
                done.append("intel_pstate no_turbo=1")
            for key in ("max_perf_pct", "min_perf_pct"):   # max first: min may not exceed max
                if self._path(INTEL_PSTATE / key).exists():
                    self._set(INTEL_PSTATE / key, "100")
            if self._path(INTEL_PSTATE / "min_perf_pct").exists():
                done.append("intel_pstate min/max_perf_pct=100")
        cpus = self._cpufreq_dirs()
        for cpu in cpus:
            maxf = (self._read(f"{cpu}/cpuinfo_max_freq") or "").strip()
            if not maxf:
                raise OSError(f"{cpu}/cpuinfo_max_freq is not readable")
            self._set(f"{cpu}/scaling_governor", "performance")
            self._set(f"{cpu}/scaling_max_freq", maxf)
            self._set(f"{cpu}/scaling_min_freq", maxf)
        if cpus:
            done.append(f"{len(cpus)} CPU(s) at governor performance, min = max = cpuinfo_max_freq")
        if not done:
            raise FileNotFoundError("cpufreq is not exposed on this machine (e.g. a VM)")
        return "locked: " + ", ".join(done)

    def _on_signal(self, signum, frame):
        raise Terminated(signum)

    def __enter__(self):
        recovered = self._recover()
        if not self.wanted:
            return self
        if not recovered:
            self.outcome = f"could not lock: {self.crash_recovery}"
            return self
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)
        try:
            self.outcome = self._lock()
        except OSError as exc:
            self.outcome = f"could not lock: {exc}"
            self.locked.clear()
            self._restore()
        except BaseException:
            # a signal while locking: __exit__ will not run for a failed __enter__, so undo here
            self.__exit__(None, None, None)
            raise
        return self

    def _restore(self):
        self.restore_problems = self._restore_pairs(self.saved, self.root)
        self.saved.clear()
        if self._wrote_state and not self.restore_problems:
            self.state_file.unlink(missing_ok=True)
            self._wrote_state = False

    def __exit__(self, *exc):
        # a second Ctrl-C or SIGTERM must not cut the restore short: held until it is done
        main = threading.current_thread() is threading.main_thread()
        if main:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, *SIGNALS})
        try:
            self._restore()
        finally:
            for sig, handler in self._old_handlers.items():
                signal.signal(sig, handler)
            self._old_handlers.clear()
            if main:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, *SIGNALS})
        return False

    def record(self) -> dict:
        """The lock as machine.json keeps it: asked for or not, what it did, the values it held."""
        return {"requested": bool(self.wanted), "locked": self.outcome.startswith("locked"),
                "outcome": self.outcome, "settings": dict(self.locked),
                "crash_recovery": self.crash_recovery}
