"""The outcome of one heap-misuse probe process: who stopped the misuse, if anyone.

One pure function, `verdict`, classifies a probe process from how it ended (exit code, signal, or a
timeout), its stderr (the `heapcost-probe:` lines of probes/probe.h and the allocator's own text), its
stdout (the `result ...` line) and the path(s) of the allocator's library. It reads no file and runs
nothing. The protocol is described in probes/README.md; in short, stderr carries
`heapcost-probe: stage=<name>` for setup-done, misuse-done, primitive (only when achieved), checked and
done (and, before setup-done, `legal-request what=<request>` and `legal-request-done` around a legal
request the misuse needs, such as malloc(0)); `heapcost-probe: target lo=<hex> hi=<hex>` for memory the
misusing access touches; and at a fatal signal
`heapcost-probe: signal sig= code= addr= pc= object= stage= call= sym=` (SIGALRM adds `hang=stall` or
`hang=deadline`: the watchdog saw one allocator call stop returning, or the probe outlive its deadline).

The rules, in the order they are applied (the first that matches decides):
- n/a: the probe could not set itself up (exit 99 or a `setup-failed` line), or said the misuse is not
  applicable at this size (`applicable=0` in the result line); or it ended normally without a result.
- caught (refused): the process ended abnormally at stage `legal-request` (inside the legal request the
  misuse needs, e.g. malloc(0)), not hung, and the allocator printed a message there or ended the process
  itself (an abort or trap raised in an allocator call or object, or a non-zero exit): it refused the request
  with its own diagnostic (efence: "Allocating 0 bytes, probably a bug."), so the misuse never happened. The
  detail names the request, the message and the signal with its code. This is not a failure to start: the
  allocator served the probe before.
- n/a, too: the process ended abnormally at stage `legal-request` otherwise (a silent fault or a hang inside
  the request): the allocator broke on a legal request, which says nothing about the misuse.
- n/a, too: before `setup-done`, a SIGSEGV, SIGBUS or SIGFPE in a known object that is not the
  allocator's, outside any allocator call (the probe's setup broke): the allocator did start. (The case
  that taught it, glibc's malloc_usable_size reading a header another allocator's block does not have, is
  avoided by probe.h now: it asks malloc_usable_size only when that belongs to the allocator.)
- allocator-failed-to-start: the process ended abnormally (signal, non-zero exit, hang) before
  `setup-done`; the detail is its first stderr line (the allocator's, else the fault record).
- missed: the primitive was achieved (stage `primitive`, or `worked=1`), whatever happened next. A
  crash after it is recorded in the detail beside the primitive; an allocator message is named as a
  detection that came too late or changed nothing ("detected silently").
- late-crash (hung): the process hung (the probe's watchdog: one allocator call in progress for about
  1.5 s, or the deadline; or the runner's timeout) without the primitive. A hang is not a report, even inside the allocator; the detail names the stage and call.
- caught (reported): without the primitive, the allocator printed a message of its own (anything on
  stderr that is neither a probe line nor routine chatter seen in a clean run). The detail is the
  message, how the process ended, and "after the check" when it came only after `checked`.
- caught (abort or trap in the allocator): without the primitive and without a message, SIGABRT,
  SIGTRAP or SIGILL raised while the probe was inside an allocator call or with the pc in an
  allocator object.
- caught (fault in the allocator): SIGSEGV, SIGBUS or SIGFPE whose pc is in one of the allocator's
  objects, or raised while the probe was inside an allocator call (`call=` is not `-`: this is how a
  statically linked allocator, whose code shares the probe's executable, is told from the probe).
- caught (fault at the misusing access): a fault in the probe's own code before `misuse-done`, at an
  address inside a declared target range: a guard page (SEGV_ACCERR) or memory the allocator gave back
  to the kernel (SEGV_MAPERR) stopped the access itself. This is deliberate for unmapped memory too
  (e.g. musl mallocng unmapping a group, glibc unmapping a large block): the access did not happen.
- caught (exit): a non-zero exit (not 99) before `checked`, without message or primitive: probe code
  never exits that way, so the allocator ended the process.
- late-crash: any other abnormal end without the primitive: a fault in the probe's own code after
  `misuse-done` (e.g. musl: a read of a block whose group was unmapped, made while checking the result
  rather than as the misuse), a fault outside the declared targets, a signal without a fault record,
  or a non-zero exit after `checked`. The allocator did not stop the misuse; the program just broke.
- mitigated: the process ran to its end, printed no allocator message, and the primitive did not work
  (`worked=0`; a measurement-only probe, `worked=-`, is reported here too).

Allocator objects are matched by full path or by file name (so `libc.so.6` matches
`/lib/x86_64-linux-gnu/libc.so.6`). Only the standard library is imported.
"""
from __future__ import annotations

import os
import re
import signal as _signals
from dataclasses import dataclass, field
from typing import Iterable, NamedTuple

PREFIX = "heapcost-probe:"
STAGES = ("setup-done", "misuse-done", "primitive", "checked", "done")
LEGAL_REQUEST = "legal-request"  # the stage inside a legal request the misuse needs (then legal-request-done)
OUTCOMES = ("caught", "missed", "mitigated", "late-crash", "allocator-failed-to-start", "n/a")
SETUP_FAILED_EXIT = 99

_FAULTS = {_signals.SIGSEGV, _signals.SIGBUS, _signals.SIGFPE}
_TRAPS = {_signals.SIGABRT, _signals.SIGTRAP, _signals.SIGILL}
_CODE_NAMES = {
    _signals.SIGSEGV: {1: "SEGV_MAPERR", 2: "SEGV_ACCERR", 3: "SEGV_BNDERR", 4: "SEGV_PKUERR"},
    _signals.SIGBUS: {1: "BUS_ADRALN", 2: "BUS_ADRERR", 3: "BUS_OBJERR"},
    _signals.SIGILL: {1: "ILL_ILLOPC", 2: "ILL_ILLOPN", 4: "ILL_ILLTRP"},
    _signals.SIGTRAP: {1: "TRAP_BRKPT", 2: "TRAP_TRACE"},
}
_GENERIC_CODES = {0: "SI_USER", 128: "SI_KERNEL", -6: "SI_TKILL"}
_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+")
_SIGNAL_LINE = re.compile(
    r"signal sig=(?P<sig>-?\d+) code=(?P<code>-?\d+) addr=(?P<addr>\S+) pc=(?P<pc>\S+) "
    r"object=(?P<object>.*?) stage=(?P<stage>\S+)(?: call=(?P<call>\S+))?(?: sym=(?P<sym>.*?))?"
    r"(?: hang=(?P<hang>stall|deadline))?$")
_GLUED = re.compile(r"(?<=[^\n])" + re.escape(PREFIX))
_TARGET_LINE = re.compile(r"target lo=(0x[0-9a-fA-F]+) hi=(0x[0-9a-fA-F]+)")


class Verdict(NamedTuple):
    outcome: str
    detail: str


@dataclass(frozen=True)
class FaultRecord:
    """The fields of one `heapcost-probe: signal ...` line."""
    sig: int
    code: int
    addr: int | None  # None for SIGABRT ("-")
    pc: int | None
    object: str  # "-" when unknown
    stage: str  # last stage reached, "-" before the first
    call: str = "-"  # allocator entry point in progress, "-" in the probe's own code
    sym: str = "-"
    hang: str = "-"  # SIGALRM from the watchdog: stall (one call stopped returning) | deadline


@dataclass
class ProbeTrace:
    """A probe's stderr, parsed: what the probe reported and what the allocator printed, in order."""
    stages: list = field(default_factory=list)
    fault: FaultRecord | None = None
    targets: list = field(default_factory=list)  # (lo, hi) address ranges
    setup_failed: str | None = None
    messages: list = field(default_factory=list)  # (allocator line, the last stage before it)
    first_line: str = ""  # the first stderr line of any kind
    request: str | None = None  # the `what=` of the last legal-request stage (e.g. "malloc(0)")


def normalize(line: str) -> str:
    """A message with its addresses and numbers blanked, to recognise an allocator's routine chatter."""
    return _NUMBERS.sub("#", line.strip())


def _int(text: str | None) -> int | None:
    if text is None or text == "-":
        return None
    try:
        return int(text, 0)
    except ValueError:
        return None


def parse_fault(line: str) -> FaultRecord | None:
    """The fields of a `signal ...` record (the part after the `heapcost-probe:` prefix)."""
    m = _SIGNAL_LINE.search(line.strip())
    if not m:
        return None
    return FaultRecord(int(m["sig"]), int(m["code"]), _int(m["addr"]), _int(m["pc"]), m["object"].strip() or "-",
                       m["stage"], m["call"] or "-", (m["sym"] or "-").strip() or "-", m["hang"] or "-")


def parse_stderr(stderr: str, chatter: Iterable[str] = frozenset()) -> ProbeTrace:
    """Split stderr into the probe's lines and the allocator's messages (routine chatter dropped)."""
    chatter = frozenset(chatter)
    trace = ProbeTrace()
    last = "-"
    # An allocator message printed without its newline (glibc-debug's "free(): invalid pointer" before
    # abort) shares a line with the probe's next record: give each record a line of its own.
    stderr = _GLUED.sub("\n" + PREFIX, stderr)
    for raw in stderr.splitlines():
        line = raw.strip()
        if not line:
            continue
        if not trace.first_line:
            trace.first_line = line
        if not line.startswith(PREFIX):
            if normalize(line) not in chatter:
                trace.messages.append((line, last))
            continue
        body = line[len(PREFIX):].strip()
        if body.startswith("stage="):
            last, _, rest = body[len("stage="):].strip().partition(" ")
            trace.stages.append(last)
            if last == LEGAL_REQUEST:
                trace.request = rest[len("what="):].strip() if rest.startswith("what=") else None
        elif body.startswith("signal "):
            trace.fault = trace.fault or parse_fault(body)
        elif body.startswith("target "):
            m = _TARGET_LINE.search(body)
            if m:
                trace.targets.append((int(m[1], 16), int(m[2], 16)))
        elif body.startswith("setup-failed"):
            trace.setup_failed = body[len("setup-failed"):].strip()
    return trace


def parse_result(stdout: str) -> dict | None:
    """The key=value pairs of the `result ...` line, or None without one."""
    for line in stdout.splitlines():
        if line.startswith("result "):
            return dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)
    return None


def signal_name(num: int | None) -> str:
    try:
        return _signals.Signals(num).name
    except (ValueError, TypeError):
        return f"signal {num}"


def _code_name(sig: int, code: int) -> str:
    return _CODE_NAMES.get(sig, {}).get(code) or _GENERIC_CODES.get(code) or str(code)


def _matches(obj: str, allocator_objects: Iterable[str]) -> bool:
    if not obj or obj == "-":
        return False
    base = os.path.basename(obj)
    return any(obj == a or base == os.path.basename(a) for a in allocator_objects if a)


def describe_fault(f: FaultRecord, sig: int | None = None) -> str:
    """One phrase naming the signal, si_code, address, and the object (and symbol) that raised it."""
    sig = f.sig if sig is None else sig
    parts = [f"{signal_name(sig)} code={f.code} ({_code_name(sig, f.code)})"]
    if f.addr is not None:
        parts.append(f"addr={f.addr:#x}")
    where = os.path.basename(f.object) if f.object != "-" else "an unknown object"
    if f.sym != "-":
        where += f" ({f.sym})"
    parts.append(f"in {where}")
    if f.call != "-":
        parts.append(f"during {f.call}")
    parts.append(f"at stage {f.stage}")
    return " ".join(parts)


def _stage_index(stage: str) -> int:
    return STAGES.index(stage) if stage in STAGES else -1


def verdict(*, exit_code: int | None = None, signal: int | None = None, stderr: str = "", stdout: str = "",
            allocator_objects: Iterable[str] = (), chatter: Iterable[str] = frozenset(),
            timed_out: bool = False) -> Verdict:
    """The outcome of one probe process and its detail (see the module docstring for the rules).

    exit_code: the exit status when the process exited; signal: the signal that killed it (as the
    runner saw it); timed_out: the runner killed it at its timeout. allocator_objects: the paths of
    the allocator's shared objects (libc.so.6 for glibc; the probe executable for a statically
    linked allocator is not needed: the fault record's `call=` covers it). chatter: normalised lines
    the allocator prints in a run without misuse."""
    allocator_objects = tuple(allocator_objects)
    trace = parse_stderr(stderr, chatter)
    values = parse_result(stdout)
    fault = trace.fault
    if signal is None and fault is not None and exit_code is None and not timed_out:
        signal = fault.sig
    hung = timed_out or signal == _signals.SIGALRM
    abnormal = hung or signal is not None or (exit_code not in (None, 0))
    reached = set(trace.stages)
    last = trace.stages[-1] if trace.stages else "-"

    # n/a: setup failed, or not applicable at this size
    if exit_code == SETUP_FAILED_EXIT or trace.setup_failed is not None:
        return Verdict("n/a", f"probe setup failed: {trace.setup_failed or 'exit 99'}")
    if values is not None and values.get("applicable") == "0":
        return Verdict("n/a", f"not applicable at size {values.get('size', '?')}: {values.get('reason', '?')}")

    ending = _ending(signal, exit_code, hung, fault)

    # caught (refused) or n/a: ended inside a legal request the misuse needs (not a failure to start)
    if abnormal and (fault.stage if fault is not None else last) == LEGAL_REQUEST:
        return _at_legal_request(trace, signal, exit_code, hung, ending, allocator_objects)

    # allocator-failed-to-start: died before setup-done
    if "setup-done" not in reached:
        if (signal in _FAULTS and fault is not None and fault.call == "-" and fault.object != "-"
                and not _matches(fault.object, allocator_objects)):
            # the probe's own setup faulted outside the allocator (as glibc's malloc_usable_size did on
            # efence's 256 KiB blocks before probe.h stopped asking it): the allocator did start
            return Verdict("n/a", f"the probe's setup broke outside the allocator: {ending}")
        if abnormal:
            first = trace.messages[0][0] if trace.messages else (trace.first_line or "no output")
            return Verdict("allocator-failed-to-start", f"{ending} before setup-done: {first[:200]}")
        return Verdict("n/a", "the probe ended without reaching setup-done")

    worked = None if values is None else {"1": True, "0": False}.get(values.get("worked"))
    message = trace.messages[0] if trace.messages else None

    # missed: the primitive was achieved, whatever came after
    if "primitive" in reached or worked is True:
        detail = _describe(values) or "primitive achieved"
        if message:
            detail += f"; the allocator reported only after or without stopping it: {message[0][:200]}"
        if abnormal:
            detail += f"; then {ending}"
        return Verdict("missed", detail)

    # late-crash: hung without the primitive
    if hung:
        return Verdict("late-crash", f"{ending} at stage {fault.stage if fault else last}")

    # caught: the allocator reported the misuse (and the primitive did not happen)
    if message:
        text, stage = message
        when = " after the check" if _stage_index(stage) >= _stage_index("checked") else ""
        end = ending if abnormal else "the process ran on"
        return Verdict("caught", f"reported{when}: {text[:200]}; {end}")

    if signal is not None:
        if fault is None:
            return Verdict("late-crash", f"{signal_name(signal)} without a fault record at stage {last}")
        in_allocator = fault.call != "-" or _matches(fault.object, allocator_objects)
        if signal in _TRAPS:
            if in_allocator:
                return Verdict("caught", f"{ending} (raised by the allocator)")
            return Verdict("late-crash", f"{ending} outside the allocator")
        if in_allocator:
            return Verdict("caught", f"{ending} (fault in the allocator)")
        at_target = fault.addr is not None and any(lo <= fault.addr < hi for lo, hi in trace.targets)
        if _stage_index(fault.stage) < _stage_index("misuse-done") and at_target:
            kind = ("guard page" if fault.code == 2 else "memory given back to the kernel" if fault.code == 1
                    else "protected memory")
            return Verdict("caught", f"{ending}: the misusing access itself faulted ({kind})")
        return Verdict("late-crash", f"{ending}: a crash in the probe's own code, not the allocator's doing")

    if exit_code not in (None, 0):
        if _stage_index(last) < _stage_index("checked"):
            return Verdict("caught", f"{ending} before the check, without a message (the allocator ended the process)")
        return Verdict("late-crash", f"{ending} after the check")

    if values is None:
        return Verdict("n/a", "the probe printed no result line")
    if worked is None:
        return Verdict("mitigated", f"measurement only: {_describe(values)}".rstrip(": "))
    return Verdict("mitigated", _describe(values) or "primitive not achieved")


def _at_legal_request(trace: ProbeTrace, signal: int | None, exit_code: int | None, hung: bool, ending: str,
                      allocator_objects: tuple) -> Verdict:
    """The process ended inside a legal request the misuse needs (stage legal-request, e.g. malloc(0)).
    The allocator refused it with its own diagnostic (a message printed there, an abort or trap raised
    by it, or an exit of its own): caught, the misuse never happened. Otherwise (a silent fault, a hang)
    it broke on a legal request: n/a, that says nothing about the misuse."""
    what = trace.request or "a legal request"
    said = next((text for text, at in trace.messages if at == LEGAL_REQUEST), None)
    fault = trace.fault
    by_allocator = fault is not None and (fault.call != "-" or _matches(fault.object, allocator_objects))
    own_end = (signal in _TRAPS and by_allocator) or (signal is None and exit_code not in (None, 0))
    if not hung and (said or own_end):
        reported = f"reported: {said[:200]}; " if said else ""
        return Verdict("caught", f"refused {what}: {reported}{ending}")
    return Verdict("n/a", f"the allocator broke on {what}, a legal request the misuse needs, without a diagnostic: "
                          f"{ending}")


def _ending(signal: int | None, exit_code: int | None, hung: bool, fault: FaultRecord | None) -> str:
    if hung:
        kind = fault.hang if fault is not None else "-"
        base = ("hung (killed at the timeout)" if signal != _signals.SIGALRM else
                "hung (one allocator call stopped returning: the probe's watchdog)" if kind == "stall" else
                "hung (still running at the probe's deadline)" if kind == "deadline" else "hung (the probe's alarm)")
        if fault is not None and fault.call != "-":
            base += f" inside {fault.call} ({os.path.basename(fault.object)})"
        return base
    if signal is not None:
        return describe_fault(fault, signal) if fault is not None else signal_name(signal)
    if exit_code not in (None, 0):
        return f"exit {exit_code}"
    return "normal exit"


def _describe(values: dict | None) -> str:
    if not values:
        return ""
    return " ".join(f"{k}={v}" for k, v in values.items() if k != "worked")
