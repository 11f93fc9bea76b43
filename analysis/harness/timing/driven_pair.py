"""A pair of processes run by one driver program, the scaffolding both ways of taking turns share (lockstep.py:
turns inside the workload; alternation.py: turns from outside): the pair checked, two scratch folders, the driver
run with the machine's CPU time read around it, its JSON report, and the pair's row of pairs.csv: the common
fields, each side's verdict and times, the pair's status and the interference around it. What differs between
the two (the driver's command, how a side's report reads as a run, the pair's own CPU time) is given by the
caller."""
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from analysis.errors import HeapcostError
from analysis.harness.process import machine, quiet
from analysis.harness.process.trial import SpeedTrial


def run_driven_pair(trial_a: SpeedTrial, trial_b: SpeedTrial, *, expected_a: str | None, expected_b: str | None,
                    first: str, cpu: int | None, chunk_us: int, pads, driver: str, one_cell: str, prefix: str,
                    command, timeout: float | None, read_side, own_cpu) -> dict:
    """The pair's row of pairs.csv (without run_id, seq, block, warmup). `command(dirs)`: the driver's argv;
    `read_side(d, data, workdir)`: a side's report as (LaunchResult, {"active", "turns", "wall"} as written, a
    reason the side failed though its run did not, or None); `own_cpu(data, results)`: the seconds of CPU the pair
    itself took, so that the rest of the machine's is interference. `driver` names the driver in an error,
    `one_cell` what a pair must share ("a lockstep pair runs one workload at one scale")."""
    from analysis.contract import runstore

    if first not in ("a", "b"):
        raise HeapcostError(f"first must be 'a' or 'b', not {first!r}")
    if trial_a.workload.id != trial_b.workload.id or trial_a.scale != trial_b.scale:
        raise HeapcostError(one_cell)
    dirs = [Path(tempfile.mkdtemp(prefix=f"heapcost-{prefix}-{s}-", dir=tempfile.gettempdir())) for s in "ab"]
    try:
        cmd = command(dirs)
        started, load = runstore.utc_now(), machine.loadavg1()
        before = quiet.read_cpu()
        proc = subprocess.run(cmd, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, timeout=timeout)
        after = quiet.read_cpu()
        try:
            data = json.loads(proc.stdout)
        except ValueError:
            raise HeapcostError(f"the {driver} driver printed no result: {proc.stderr.strip()[:200]}") from None
        row = {"workload": trial_a.workload.id, "scale": f"{trial_a.scale:.6g}",
               "allocator_a": trial_a.alloc.id, "allocator_b": trial_b.alloc.id, "first": first,
               "cpu": "" if cpu is None else cpu, "chunk_us": int(chunk_us), "env_pad_a": pads[0],
               "env_pad_b": pads[1], "loadavg1": load, "started_utc": started}
        verdicts, results = [], {}
        for side, trial, workdir, expected in (("a", trial_a, dirs[0], expected_a),
                                               ("b", trial_b, dirs[1], expected_b)):
            result, times, failure = read_side(data.get(side, {}), data, workdir)
            status, reason, malloc_lib = trial.judge(result, workdir, expected)
            if status == "ok" and failure:
                status, reason = "failed", failure
            verdicts.append((side, status, reason))
            results[side] = result
            row.update({f"status_{side}": status, f"exit_code_{side}": result.exit_code,
                        f"active_{side}_s": times["active"], f"turns_{side}": times["turns"],
                        f"wall_{side}_s": times["wall"], f"user_{side}_s": f"{result.user_s:.6f}",
                        f"sys_{side}_s": f"{result.sys_s:.6f}", f"maxrss_{side}_kb": result.maxrss_kb,
                        f"malloc_lib_{side}": malloc_lib})
        bad = [(s, st, why) for s, st, why in verdicts if st != "ok"]
        row["status"] = bad[0][1] if bad else "ok"
        row["reason"] = "; ".join(f"{s}: {why or st}" for s, st, why in bad)
        row.update(quiet.interference(before, after, own_cpu(data, results), float(data.get("wall_s", 0.0)), cpu))
        return row
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
