"""A one-node Slurm cluster on the loopback interface, for the fleet's tests: munged with its own key and
socket, slurmctld and slurmd with their own configuration, state and ports in a private folder (nothing
of the system's /etc/slurm or /etc/munge is used). The node is `loopback`, its feature `loopback` (the
fleet's host name). Job states come from squeue (MinJobAge keeps finished jobs listed), so no slurmdbd."""
import os
import shutil
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "srun", "scontrol")
FEATURE = "loopback"
# Snakemake with its remote executors' wait between job-status queries capped at POLL_S: the Slurm plugin waits
# 10 s longer after every query that saw no job finish (a cluster's pace), which here was a third of the test
# spent waiting. Only how often squeue is asked changes; what is submitted and how its states are read do not.
POLL_S = 1
SNAKEMAKE_POLLING_OFTEN = f"""
import asyncio, sys
from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor

async def sleep(self):
    await asyncio.sleep(min({POLL_S}, self.next_seconds_between_status_checks))

RemoteExecutor.sleep = sleep
from snakemake.cli import main
sys.exit(main())
"""


def _binary(name: str) -> str | None:
    """The daemons live in /usr/sbin, which a non-login PATH may lack."""
    return shutil.which(name) or next((f"{d}/{name}" for d in ("/usr/sbin", "/sbin")
                                       if os.access(f"{d}/{name}", os.X_OK)), None)


def missing_daemons() -> list[str]:
    return [name for name in DAEMONS if _binary(name) is None]


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def slurm_conf(d: Path, ctld_port: int, slurmd_port: int) -> str:
    return f"""ClusterName=heapcost-loopback
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={d}/munge.sock
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=900
NodeName=loopback NodeAddr=127.0.0.1 NodeHostname=localhost CPUs={os.cpu_count() or 1} RealMemory=500 Feature={FEATURE} State=UNKNOWN
PartitionName=fleet Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def _wait(predicate, seconds: float, what: str, log: Path | None = None):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    tail = log.read_text()[-2000:] if log is not None and log.is_file() else ""
    raise RuntimeError(f"the loopback cluster: {what} did not happen within {seconds:.0f} s\n{tail}")


def _alive(pid: int) -> bool:
    """Still running. A daemon that has exited is a zombie until the init process reaps it (here that took
    about 1.5 s), and signal 0 still reaches a zombie: its state in /proc tells."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _stop(pid_files) -> None:
    """SIGTERM to every daemon at once (each takes a second or two to stop), SIGKILL to any left after 10 s."""
    pids = []
    for pid_file in pid_files:
        try:
            pid = int(pid_file.read_text().strip())
            os.kill(pid, 15)
        except (OSError, ValueError):
            continue
        pids.append(pid)
    for _ in range(200):
        pids = [pid for pid in pids if _alive(pid)]
        if not pids:
            return
        time.sleep(0.05)
    for pid in pids:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


@contextmanager
def loopback_cluster(folder: Path):
    """Start the cluster in `folder`; yields the environment (SLURM_CONF) its clients need; stops it."""
    d = Path(folder)
    (d / "state").mkdir(parents=True)
    (d / "spool").mkdir()
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    ctld_port, slurmd_port = free_ports(2)
    (d / "slurm.conf").write_text(slurm_conf(d, ctld_port, slurmd_port))
    env = dict(os.environ, SLURM_CONF=str(d / "slurm.conf"))
    # snakemake-executor-plugin-slurm-jobstep drops every SLURM_* variable but the job's identity before its
    # srun, SLURM_CONF included: a cluster configured outside /etc/slurm needs it given back to srun.
    (d / "bin").mkdir()
    (d / "bin" / "srun").write_text(f'#!/bin/sh\nSLURM_CONF="{d}/slurm.conf" exec {_binary("srun")} "$@"\n')
    (d / "bin" / "srun").chmod(0o755)
    env["PATH"] = f"{d / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    try:
        subprocess.run([_binary("munged"), "--force", f"--key-file={key}", f"--socket={d}/munge.sock",
                        f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log", f"--seed-file={d}/munged.seed"],
                       check=True, env=env, timeout=30)
        subprocess.run([_binary("slurmctld"), "-i"], check=True, env=env, timeout=30)
        subprocess.run([_binary("slurmd"), "-N", "loopback"], check=True, env=env, timeout=30)

        def listening():
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", ctld_port)) == 0

        def node_idle():
            out = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], env=env, capture_output=True, text=True).stdout
            return out.strip() == "idle"
        # a client that finds slurmctld not yet listening retries a second later: ask once it listens
        _wait(listening, 60, "slurmctld listening", d / "slurmctld.log")
        _wait(node_idle, 60, "node loopback idle", d / "slurmctld.log")
        yield env
    finally:
        subprocess.run(["scancel", "--user", "root"], env=env, capture_output=True, timeout=30)
        _stop([d / name for name in ("slurmd.pid", "slurmctld.pid", "munged.pid")])
