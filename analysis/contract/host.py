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
"""
import hashlib
import json
import re
import statistics

IDENTITY_FIELDS = ("cpu_model", "cpu_family", "cpu_model_number", "cpu_stepping", "nominal_mhz",
                   "logical_cpus", "memory_gib", "kernel", "hypervisor")
# The processor kind: what a debate's answer is given per ("host" in the debates). Machines of one kind with
# another kernel, memory or VM are a level beneath it: recorded, pooled within the kind.
PROCESSOR_FIELDS = ("cpu_model", "cpu_family", "cpu_model_number", "cpu_stepping", "nominal_mhz")
MHZ_STEP = 10
KB_PER_GIB = 1024 * 1024
UNKNOWN_HOST = "unknown"


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
    """The processor kind of a host identity, for the debates' per-host answers: the model name, its nominal
    frequency and, where recorded, its family/model number/stepping."""
    label = identity.get("cpu_model") or "unknown CPU"
    if identity.get("nominal_mhz"):
        label += f" {identity['nominal_mhz']} MHz"
    ids = [identity.get(f) for f in ("cpu_family", "cpu_model_number", "cpu_stepping")]
    return label + (f" ({'/'.join(str(i) for i in ids)})" if all(i is not None for i in ids) else "")


def processor_slug(label: str) -> str:
    """A processor label as a name for files and folders: 'AMD EPYC 2450 MHz (25/1/1)' -> 'amd-epyc-2450-mhz-25-1-1'."""
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-") or "unknown-processor"


def extends_label(fuller: str, partial: str) -> bool:
    """Whether processor label `fuller` is label `partial` recorded with its family/model/stepping: runs
    labelled `partial` may be of that very processor (processor_label)."""
    return fuller.startswith(partial + " (")


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
