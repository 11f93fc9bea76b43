"""Which kind of host measured a run: a stable identity read from machine.json, and a short fingerprint of it.

Runs from the same kind of host share a fingerprint, so the analysis can take the host as a factor. The
identity is computed from what machine.json records, old files included (the published runs lack the CPU
family, model number and stepping: those read as None). `host_groups` puts such a run with the newer runs of
the one host kind that agrees with everything it records, so a new run on a published run's host joins it.

The nominal frequency is part of the identity. Under a hypervisor the CPU model string is often masked (the
published runs say only "AMD EPYC" for two different processors) and the MHz /proc/cpuinfo reports there is
the host's fixed TSC rate, so it is what tells those processors apart. It is rounded to 10 MHz because the
kernel calibrates it anew at every boot (2445.422 one boot, 2445.406 another). On bare metal the cpuinfo
MHz is the current, varying frequency: there the harness records cpufreq's cpuinfo_max_freq as
`nominal_mhz` instead, and without either the frequency is left out (None) rather than guessed.
Memory is rounded to whole GiB for the same reason: MemTotal moves by a few hundred kB between kernels.

A machine is one boot of one computer, virtual or not: machine.json records `machine_id`, a short hash of the
kernel's boot id (/proc/sys/kernel/random/boot_id), so a reboot counts as a new machine. That is the level at
which a processor kind's answers vary (two machines of one kind can differ by more than either's interval).
Runs published before the id was recorded take (processor kind, kernel build) as their machine: several
virtual machines that booted the same kernel on the same kind cannot be told apart there, so such a machine
may be several (`machine_of` says which runs are identified). Each machine has a short name derived from
its identity, stable as runs are added (`machine_name`), and each kind one label (`processor_label`): these are
the names every table, figure and sentence uses.
"""
import hashlib
import json
import re
import statistics
from dataclasses import dataclass

IDENTITY_FIELDS = ("cpu_model", "cpu_family", "cpu_model_number", "cpu_stepping", "nominal_mhz",
                   "logical_cpus", "memory_gib", "kernel", "hypervisor")
# The processor kind: what a debate's answer is given per ("host" in the debates). Machines of one kind with
# another kernel, memory or VM are a level beneath it: recorded, pooled within the kind.
PROCESSOR_FIELDS = ("cpu_model", "cpu_family", "cpu_model_number", "cpu_stepping", "nominal_mhz")
MHZ_STEP = 10
KB_PER_GIB = 1024 * 1024
UNKNOWN_HOST = "unknown"


# the machine id: this many hex digits of the SHA-256 of the boot id, enough to tell every machine of a
# dataset apart and too few to recover the boot id
MACHINE_ID_DIGITS = 12
# a machine's short name in tables and figures: this many of its id's digits
MACHINE_NAME_DIGITS = 6
NOT_RECORDED = "family not recorded"


def boot_machine_id(boot_id: str) -> str | None:
    """The machine id of a boot (the kernel's boot_id), or None when there is none to read."""
    boot_id = (boot_id or "").strip().lower()
    if not boot_id:
        return None
    return hashlib.sha256(("heapcost machine " + boot_id).encode()).hexdigest()[:MACHINE_ID_DIGITS]


def _int_or_none(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def nominal_mhz(cpu: dict) -> int | None:
    """The processor's nominal frequency to MHZ_STEP: recorded as such, else a hypervisor's fixed cpuinfo MHz."""
    mhz = cpu.get("nominal_mhz")
    if mhz is None and cpu.get("hypervisor_flag") and cpu.get("cpuinfo_mhz"):
        mhz = statistics.median(float(m) for m in cpu["cpuinfo_mhz"])
    if mhz is None:
        return None
    return int(round(float(mhz) / MHZ_STEP) * MHZ_STEP)


def host_identity(machine: dict) -> dict:
    """The host's identity (IDENTITY_FIELDS, None where machine.json does not record it)."""
    cpu = (machine or {}).get("cpu") or {}
    memory_kb = _int_or_none((machine or {}).get("memory_kb"))
    return {
        "cpu_model": cpu.get("model"),
        "cpu_family": _int_or_none(cpu.get("family")),
        "cpu_model_number": _int_or_none(cpu.get("model_number")),
        "cpu_stepping": _int_or_none(cpu.get("stepping")),
        "nominal_mhz": nominal_mhz(cpu),
        "logical_cpus": _int_or_none(cpu.get("logical_cpus")),
        "memory_gib": round(memory_kb / KB_PER_GIB) if memory_kb is not None else None,
        "kernel": (machine or {}).get("kernel"),
        "hypervisor": cpu.get("hypervisor_flag") if isinstance(cpu.get("hypervisor_flag"), bool) else None,
    }


def fingerprint_of_identity(identity: dict) -> str:
    """12 hex digits of the SHA-256 of the identity; UNKNOWN_HOST when the identity records nothing."""
    if all(identity.get(k) is None for k in IDENTITY_FIELDS):
        return UNKNOWN_HOST
    canonical = json.dumps({k: identity.get(k) for k in IDENTITY_FIELDS}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def host_fingerprint(machine: dict) -> str:
    """A short stable hash of the host's identity: equal for runs from the same kind of host."""
    return fingerprint_of_identity(host_identity(machine))


def host_label(identity: dict) -> str:
    """A short human description of a host kind for tables and the paper."""
    parts = [identity.get("cpu_model") or "unknown CPU"]
    if identity.get("nominal_mhz"):
        parts[0] += f" {identity['nominal_mhz']} MHz"
    if identity.get("logical_cpus"):
        parts.append(f"{identity['logical_cpus']} CPUs")
    if identity.get("memory_gib") is not None:
        parts.append(f"{identity['memory_gib']} GiB")
    if identity.get("kernel"):
        parts.append(f"kernel {identity['kernel']}")
    if identity.get("hypervisor"):
        parts.append("VM")
    return ", ".join(parts)


def processor_label(identity: dict) -> str:
    """The processor kind of a host identity, its one name: the model name, its nominal frequency and its
    family/model number/stepping, or ", family not recorded" where machine.json lacks them (such a kind never
    reads like one recorded in full)."""
    label = identity.get("cpu_model") or "unknown CPU"
    if identity.get("nominal_mhz"):
        label += f" {identity['nominal_mhz']} MHz"
    ids = [identity.get(f) for f in ("cpu_family", "cpu_model_number", "cpu_stepping")]
    return label + (f" ({'/'.join(str(i) for i in ids)})" if all(i is not None for i in ids) else f", {NOT_RECORDED}")


@dataclass(frozen=True)
class Machine:
    """One machine of a processor kind: `id` its identity (the boot id's hash, or for runs that did not record
    one the kind and kernel build's), `identified` whether it is one boot for certain."""
    id: str
    kind: str
    identified: bool
    kernel: str | None

    @property
    def name(self) -> str:
        return machine_name(self.id, self.identified)


def machine_name(machine_id: str, identified: bool) -> str:
    """The short name of a machine: M-<digits> for a boot, K-<digits> for a kind and kernel build whose runs
    recorded no boot (possibly several virtual machines)."""
    return ("M-" if identified else "K-") + machine_id[:MACHINE_NAME_DIGITS]


def machine_of(machine: dict, kind: str | None = None) -> Machine:
    """The machine that wrote machine.json: its recorded boot hash, else (processor kind, kernel build).
    `kind`: the run's processor kind where the dataset joined it to a fuller one (processor_groups)."""
    identity = host_identity(machine)
    kind = kind or processor_label(identity)
    recorded = (machine or {}).get("machine_id")
    if isinstance(recorded, str) and re.fullmatch(r"[0-9a-f]{%d}" % MACHINE_ID_DIGITS, recorded):
        return Machine(recorded, kind, True, identity.get("kernel"))
    legacy = hashlib.sha256(json.dumps([kind, identity.get("kernel")]).encode()).hexdigest()[:MACHINE_ID_DIGITS]
    return Machine(legacy, kind, False, identity.get("kernel"))


def machine_groups(machines: dict) -> dict[str, Machine]:
    """{run: its Machine} for {run: machine.json}, each within its processor kind as processor_groups joins it."""
    kinds = processor_groups(machines)
    return {run: machine_of(m, kinds[run]) for run, m in machines.items()}


def processor_slug(label: str) -> str:
    """A processor label as a name for files and folders: 'AMD EPYC 2450 MHz (25/1/1)' -> 'amd-epyc-2450-mhz-25-1-1'."""
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-") or "unknown-processor"


def canonical_label(label: str) -> str:
    """A processor label as processor_label writes it now: registrations made before a kind without its
    family/model/stepping read ", family not recorded" named it by model and frequency alone."""
    label = str(label)
    if label.endswith(f", {NOT_RECORDED}") or re.search(r"\(\d+/\d+/\d+\)$", label):
        return label
    return f"{label}, {NOT_RECORDED}"


def extends_label(fuller: str, partial: str) -> bool:
    """Whether processor label `fuller` is label `partial` recorded with its family/model/stepping: runs
    labelled `partial` may be of that very processor (processor_label)."""
    suffix = f", {NOT_RECORDED}"
    return partial.endswith(suffix) and fuller.startswith(partial[:-len(suffix)] + " (")


def _agrees(partial: dict, full: dict, fields=IDENTITY_FIELDS) -> bool:
    return all(partial.get(k) is None or partial.get(k) == full.get(k) for k in fields)


def _joined(identities: dict, fields) -> dict:
    """{run: the identity (over `fields`) of its group}: a run whose identity lacks fields joins the one kind
    that records more and agrees on all it records; with none or several such kinds it keeps its own."""
    def key(i):
        return json.dumps({k: i.get(k) for k in fields}, sort_keys=True)
    kinds = {key(i): {k: i.get(k) for k in fields} for i in identities.values()}
    out = {}
    for run, ident in identities.items():
        own = key(ident)
        missing = {k for k in fields if ident.get(k) is None}
        fuller = {fp for fp, other in kinds.items() if fp != own
                  and missing > {k for k in fields if other.get(k) is None} and _agrees(ident, other, fields)}
        known = any(ident.get(k) is not None for k in fields)
        out[run] = kinds[fuller.pop()] if len(fuller) == 1 and known else kinds[own]
    return out


def host_groups(machines: dict) -> tuple[dict, dict]:
    """({run: fingerprint of its host kind}, {fingerprint: identity}) for {run: machine.json}. A run whose
    identity lacks fields joins the one host kind that records more and agrees on all it records; with none
    or several such kinds it keeps its own fingerprint."""
    joined = _joined({run: host_identity(m) for run, m in machines.items()}, IDENTITY_FIELDS)
    group = {run: fingerprint_of_identity(i) for run, i in joined.items()}
    return group, {group[run]: i for run, i in joined.items()}


def processor_groups(machines: dict) -> dict:
    """{run: the label of its processor kind} for {run: machine.json}, joined as host_groups joins host kinds:
    a run that did not record its CPU family, model number and stepping joins the one recorded processor
    kind with the same model name and nominal frequency."""
    joined = _joined({run: host_identity(m) for run, m in machines.items()}, PROCESSOR_FIELDS)
    return {run: processor_label(i) for run, i in joined.items()}


def dataset_machines(runs, run_ids=()) -> dict[str, Machine]:
    """{run: its Machine} over every run of the dataset (`runs`: a Dataset or its folder) that has a
    machine.json, and `run_ids` besides (one without a readable machine.json counts as having recorded
    nothing), grouped by machine_groups: a machine's name is the same wherever the dataset is read."""
    from analysis.contract.dataset import load

    ds = load(runs)
    found = {run for run in ds.run_ids() if ds.has(run, "machine.json")}
    return machine_groups({run: ds.machine(run) for run in sorted(found | set(run_ids))})
