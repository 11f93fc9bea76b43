"""The outcome of one run of a brought exploitation-technique program (how2heap's glibc_2.36 folder, built by
hand: analysis/harness/security/techniques.py): did the technique work under the allocator, or who stopped it.

Such a program asserts its own success: it ends with status 0 when the technique's checks held, and with the C
library's assertion message (glibc's `prog: file.c:58: main: Assertion `...' failed.`, musl's `Assertion failed: ...
(file.c: main: 58)`) and SIGABRT when one of them did not. One pure function, `verdict`, classifies a run from how
it ended (exit status, signal, timeout) and its stderr; it reads no file and runs nothing. The fault line
`heapcost-technique: signal ... object=<path>` is written when the program dies of a fault or a trap: by the
preloaded security/faultwhere.c in a dynamically linked program, by security/faulttrace.c (ptrace, with the first bytes
of the instruction at pc: `insn=`) around a statically linked one. In a static program the C library's allocator
shares the program's file, so its own code is told by function: the caller passes the program's functions and which
of them are the allocator's (`functions`).

The rules, in the order they are applied (the first that matches decides):
- hangs: the runner killed the program at its timeout (or its CPU limit).
- works: the program exited with status 0: its own checks of the technique held. An allocator message printed
  on the way is named in the detail (reported without stopping it).
- not-applicable: the program's own assertion failed (the C library's assertion message): the technique's
  precondition or result did not hold under this allocator, and the allocator did not end the program first. An
  allocator message printed before it is named in the detail. (A cell is not-applicable without any run, too, when
  the program does not build against the configuration's C library: analysis/harness/security/techniques.py.)
- stopped: the allocator ended the program with a message of its own (ALLOCATOR_MESSAGES: glibc's
  `malloc(): ...`, `free(): ...`, `double free or corruption (...)`, scudo, hardened_malloc, mimalloc, jemalloc,
  tcmalloc, OpenBSD's malloc, mozjemalloc's release assertion, efence, duma, dmalloc); or, without a message, with
  a deliberate trap in its own code: SIGILL or SIGTRAP raised there, or a write to address 0 (mozjemalloc's
  release assertions crash so, silently), or a privileged `hlt` (musl's a_crash: its mallocng's failed consistency
  checks end the program so, the kernel reporting SIGSEGV with code SI_KERNEL at address 0). Its own code means one
  of its own libraries (`allocator_objects`: the preloaded ones; glibc's checks always print, so libc.so.6 is not
  one) or, in a statically linked program, one of its own functions (`functions`).
- crashes: any other abnormal end: a signal (a fault in the program, in libc or in the allocator at an address
  the allocator did not choose), an abort without any message, a non-zero exit without one.
"""
from __future__ import annotations

import os
import re
import signal as _signals
from typing import Iterable, NamedTuple

from analysis.harness.security.probe_verdict import signal_name

OUTCOMES = ("works", "stopped", "not-applicable", "crashes", "hangs")
NOT_RUN = "not-run"  # the runner could not run the program under the allocator (its rows say why)
FAULT_PREFIX = "heapcost-technique:"

_GLIBC_CALLS = (r"malloc|free|realloc|calloc|_int_malloc|_int_free|_int_realloc|_int_memalign|munmap_chunk"
                r"|mremap_chunk|malloc_consolidate|tcache_thread_shutdown|memalign|aligned_alloc|posix_memalign"
                r"|malloc_check_get_size|_int_free_merge_chunk|_int_free_create_chunk|_int_free_maybe_consolidate")
# (allocator, pattern searched in each stderr line): the messages with which allocators report heap misuse.
ALLOCATOR_MESSAGES = (
    # OpenBSD's "prog(pid) in free(): ..." before glibc's "free(): ...", which it contains
    ("omalloc", re.compile(r"\S+(?:\(\d+\))? in (?:malloc|free|realloc|calloc|recallocarray|freezero"
                           r"|posix_memalign|aligned_alloc|malloc_conceal|calloc_conceal)\(\): ")),
    # glibc's own: a letter before it makes another word; a message printed without its newline may follow text
    ("glibc", re.compile(r"(?<![A-Za-z_(])(?:%s)\(\): \S.*" % _GLIBC_CALLS)),
    ("glibc", re.compile(r"double free or corruption \(.+\)")),
    ("glibc", re.compile(r"corrupted (?:size vs\. prev_size|double-linked list)")),
    ("glibc", re.compile(r"break adjusted to free malloc space")),
    ("glibc", re.compile(r"Fatal glibc error: malloc assertion failure")),
    ("scudo", re.compile(r"Scudo ERROR: ")),
    ("hardened_malloc", re.compile(r"fatal allocator error: ")),
    ("mimalloc", re.compile(r"mimalloc: error: ")),
    ("jemalloc", re.compile(r"<jemalloc>: ")),
    ("tcmalloc", re.compile(r"src/tcmalloc\.cc:\d+\] |memory allocation bug: |memory stomping bug: "
                            r"|Found a corrupted memory buffer in MallocBlock|Check failed: .*(?:delete|free)")),
    ("mozjemalloc", re.compile(r"Hit MOZ_CRASH\(|Assertion failure: .+, at \S+:\d+")),
    ("efence", re.compile(r"ElectricFence (?:Aborting|Exiting): ")),
    ("duma", re.compile(r"DUMA (?:Aborting|Exiting): ")),
    ("dmalloc", re.compile(r"debug-malloc library: dumping program")),
    ("tbbmalloc", re.compile(r"Assertion .+ failed \(located in the .+ function")),
)
# the C library's assert(3): glibc's "prog: file.c:58: main: Assertion `evil == &stack_target' failed.", musl's
# "Assertion failed: evil == &stack_target (file.c: main: 58)"
ASSERTION = re.compile(r"Assertion `.*' failed\.?|Assertion failed: .+ \(\S+: \S+: \d+\)")
_FAULT_LINE = re.compile(r"signal sig=(?P<sig>-?\d+) code=(?P<code>-?\d+) addr=(?P<addr>0x[0-9a-fA-F]+) "
                         r"pc=(?P<pc>0x[0-9a-fA-F]+) object=(?P<object>.*?)(?: insn=(?P<insn>[0-9a-f]+|-))?$")
_TRAPS = {_signals.SIGILL, _signals.SIGTRAP}
SI_KERNEL = 128  # si_code of a general-protection fault (a privileged instruction, a non-canonical address)
HLT = "f4"  # x86-64's privileged halt: musl's a_crash


class Verdict(NamedTuple):
    outcome: str
    detail: str


class Fault(NamedTuple):
    sig: int
    code: int
    addr: int
    pc: int
    object: str
    insn: str = ""  # hex bytes at pc (faulttrace.c), '' when not recorded


def allocator_message(line: str) -> tuple[str, str] | None:
    """(allocator, the message from where it starts) when `line` holds an allocator's report, else None.
    A line holding the program's own assertion is never one (mozjemalloc's `Assertion failure:` differs)."""
    if ASSERTION.search(line):
        return None
    for who, pattern in ALLOCATOR_MESSAGES:
        m = pattern.search(line)
        if m:
            return who, line[m.start():].strip()
    return None


def parse_fault(stderr: str) -> Fault | None:
    """The fault line faultwhere.c wrote, if any."""
    for line in stderr.splitlines():
        line = line.strip()
        if line.startswith(FAULT_PREFIX):
            m = _FAULT_LINE.search(line[len(FAULT_PREFIX):].strip())
            if m:
                return Fault(int(m["sig"]), int(m["code"]), int(m["addr"], 16), int(m["pc"], 16),
                             m["object"].strip() or "-", "" if m["insn"] in (None, "-") else m["insn"])
    return None


def _matches(obj: str, allocator_objects: Iterable[str]) -> bool:
    if not obj or obj in ("-", "(main program)"):
        return False
    base = os.path.basename(obj)
    return any(obj == a or base == os.path.basename(a) for a in allocator_objects if a)


def function_at(functions: Iterable[tuple], pc: int) -> tuple[str, bool]:
    """(name, the allocator's) of the function of `functions` ((start, end, name, the allocator's)) holding pc,
    or ('', False)."""
    for start, end, name, allocators in functions:
        if start <= pc < end:
            return name, bool(allocators)
    return "", False


def _ending(signal: int | None, exit_code: int | None, fault: Fault | None, function: str = "",
            allocators: bool = False) -> str:
    if signal is not None:
        text = signal_name(signal)
        if fault is not None and fault.sig == signal:
            if function:
                where = function + (" (the allocator's code)" if allocators else "")
            else:
                where = "the program" if fault.object == "(main program)" else os.path.basename(fault.object)
            # a general-protection fault reports no address (a privileged instruction, a non-canonical address)
            text += (" (general protection)" if fault.code == SI_KERNEL and not fault.addr else f" at {fault.addr:#x}")
            text += f" in {where}"
        return text
    return f"exit {exit_code}"


def verdict(*, exit_code: int | None = None, signal: int | None = None, stderr: str = "",
            timed_out: bool = False, allocator_objects: Iterable[str] = (), functions: Iterable[tuple] = ()) -> Verdict:
    """The outcome of one run of a technique program and its detail (the rules: the module docstring).
    exit_code: the status when it exited; signal: the signal that ended it; timed_out: the runner killed it at
    its timeout; allocator_objects: the allocator's own libraries (the preloaded ones); functions: a statically
    linked program's functions as (start, end, name, the allocator's), () for a dynamically linked one."""
    if timed_out or signal in (_signals.SIGXCPU, _signals.SIGKILL):
        return Verdict("hangs", "killed at the timeout" if timed_out else f"{signal_name(signal)} (the CPU limit)")
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    messages = [m for m in map(allocator_message, lines) if m]
    assertion = next((ln for ln in reversed(lines) if ASSERTION.search(ln)), None)
    said = f"{messages[0][0]}: {messages[0][1][:200]}" if messages else ""
    if signal is None and exit_code == 0:
        return Verdict("works", "the technique's checks held"
                       + (f"; the allocator reported without stopping it ({said})" if said else ""))
    fault = parse_fault(stderr)
    function, in_allocator = function_at(functions, fault.pc) if fault is not None else ("", False)
    ending = _ending(signal, exit_code, fault, function, in_allocator)
    if assertion is not None:
        text = ASSERTION.search(assertion).group(0)
        return Verdict("not-applicable", f"the technique's own check failed: {text[:200]}"
                       + (f"; the allocator reported before ({said})" if said else ""))
    if messages:
        return Verdict("stopped", f"{said}; {ending}")
    if fault is not None and fault.sig == signal and (in_allocator or _matches(fault.object, allocator_objects)):
        if signal in _TRAPS:
            return Verdict("stopped", f"{ending}: a trap in the allocator's own code")
        if signal == _signals.SIGSEGV and fault.code == SI_KERNEL and fault.insn.startswith(HLT):
            return Verdict("stopped", f"{ending}: a privileged hlt there (a deliberate crash: musl's a_crash)")
        if signal == _signals.SIGSEGV and fault.addr == 0 and fault.code != SI_KERNEL:
            return Verdict("stopped", f"{ending}: a write to address 0 in the allocator's own code (a deliberate "
                                      "crash, as mozjemalloc's release assertions)")
    if signal is not None:
        why = " without an allocator message" if signal == _signals.SIGABRT else ""
        return Verdict("crashes", f"{ending}{why}")
    return Verdict("crashes", f"{ending} without an allocator message")
