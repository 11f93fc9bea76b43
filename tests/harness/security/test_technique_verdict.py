"""The outcome of one run of a brought technique program (analysis/harness/security/technique_verdict.py) on synthetic
endings and stderr: one test per rule, each allocator's abort message, a statically linked (musl) program's
assertion and faults located by function, and a cell's aggregation."""
import signal

import pytest

from analysis.harness.security.technique_verdict import allocator_message, parse_fault, verdict
from analysis.harness.security.techniques import summarize

ASSERTION = "tcache_poisoning: tcache_poisoning.c:58: main: Assertion `(long)target == (long)c' failed."
MOZ = "/cache/allocators/mozjemalloc-poison/lib/libmozjemalloc-poison.so"


def fault_line(sig, addr, obj, pc=0x7f0012345678):
    return f"heapcost-technique: signal sig={sig} code=1 addr={addr:#x} pc={pc:#x} object={obj}"


def test_exit_zero_works_even_when_the_allocator_said_something():
    assert verdict(exit_code=0, stderr="p4 is 0x7ffd... and should be on the stack!\n").outcome == "works"
    v = verdict(exit_code=0, stderr="mimalloc: error: double free detected of block 0x1234 with size 16\n")
    assert v.outcome == "works" and "reported without stopping it (mimalloc: mimalloc: error: double free" in v.detail


def test_the_techniques_own_failed_assertion_is_not_applicable():
    v = verdict(signal=signal.SIGABRT, stderr="Now we malloc\n" + ASSERTION + "\n")
    assert v == ("not-applicable", "the technique's own check failed: Assertion `(long)target == (long)c' failed.")


def test_an_allocator_message_before_the_failed_assertion_is_named_but_the_assertion_decides():
    v = verdict(signal=signal.SIGABRT, stderr="mimalloc: error: corrupted free list entry of size 16b\n" + ASSERTION)
    assert v.outcome == "not-applicable" and "the allocator reported before (mimalloc:" in v.detail


@pytest.mark.parametrize("message, who", [
    ("free(): double free detected in tcache 2", "glibc"),
    ("malloc(): unaligned tcache chunk detected", "glibc"),
    ("double free or corruption (out)", "glibc"),
    ("corrupted size vs. prev_size while consolidating", "glibc"),
    ("malloc_consolidate(): invalid chunk size", "glibc"),
    ("munmap_chunk(): invalid pointer", "glibc"),
    ("Fatal glibc error: malloc assertion failure in sysmalloc: (old_top == initial_top (av))", "glibc"),
    ("Scudo ERROR: invalid chunk state when deallocating address 0x7b0000000010", "scudo"),
    ("fatal allocator error: double free", "hardened_malloc"),
    ("mimalloc: error: double free detected of block 0x1234 with size 16", "mimalloc"),
    ("<jemalloc>: size mismatch detected (true size 16 vs input size 32)", "jemalloc"),
    ("src/tcmalloc.cc:302] Attempt to free invalid pointer 0x55d0", "tcmalloc"),
    ("memory allocation bug: object at 0x55a8 has been already deallocated", "tcmalloc"),
    ("house_of_spirit(4242) in free(): bogus pointer (double free?) 0x7ffd1000", "omalloc"),
    ("Assertion failure: arena_chunk_map_bits_t (Double-free?), at memory/build/mozjemalloc.cpp:3084", "mozjemalloc"),
    ("ElectricFence Aborting: free(55d0): address not from malloc().", "efence"),
    ("DUMA Aborting: free(55d0): address not from DUMA or already freed.", "duma"),
    ("debug-malloc library: dumping program, fatal error", "dmalloc"),
])
def test_each_allocators_abort_message_is_stopped(message, who):
    assert allocator_message(message)[0] == who
    v = verdict(signal=signal.SIGABRT, stderr=f"Freeing the chunk again...\n{message}\n")
    assert v.outcome == "stopped"
    assert v.detail.startswith(f"{who}: {message[:60]}") and v.detail.endswith("SIGABRT")


def test_a_message_glued_to_the_programs_own_text_is_found():
    assert allocator_message("4th calloc(1,8): 0x55d0free(): invalid pointer") == ("glibc", "free(): invalid pointer")


def test_the_programs_own_text_and_banners_are_not_allocator_messages():
    for line in ("Now, we can free p1 again, since it's not the head of the free list.",
                 "We call free() on the fake chunk", "  DUMA 2.5.15 (shared library, NO_LEAKDETECTION)",
                 "Electric Fence 2.2 Copyright (C) 1987-1999 Bruce Perens <bruce@perens.com>", ASSERTION):
        assert allocator_message(line) is None, line


def test_an_allocator_message_with_a_non_zero_exit_is_stopped():
    v = verdict(exit_code=1, stderr="ElectricFence Exiting: mprotect() failed: Cannot allocate memory\n")
    assert v.outcome == "stopped" and v.detail.endswith("exit 1")


def test_a_silent_write_to_address_zero_in_the_allocators_own_code_is_stopped():
    """mozjemalloc's release assertions crash without a word, writing to address 0 in its own code."""
    v = verdict(signal=signal.SIGSEGV, stderr=fault_line(signal.SIGSEGV, 0, MOZ), allocator_objects=[MOZ])
    assert v.outcome == "stopped" and "in libmozjemalloc-poison.so" in v.detail and "address 0" in v.detail


def test_a_trap_in_the_allocators_own_code_is_stopped():
    v = verdict(signal=signal.SIGILL, stderr=fault_line(signal.SIGILL, 0x7f00, MOZ), allocator_objects=[MOZ])
    assert v.outcome == "stopped" and "a trap in the allocator's own code" in v.detail


def test_a_fault_elsewhere_or_at_an_address_the_allocator_did_not_choose_crashes():
    in_program = verdict(signal=signal.SIGSEGV, stderr=fault_line(signal.SIGSEGV, 0, "(main program)"),
                         allocator_objects=[MOZ])
    assert in_program == ("crashes", "SIGSEGV at 0x0 in the program")
    wild = verdict(signal=signal.SIGSEGV, stderr=fault_line(signal.SIGSEGV, 0x10, MOZ), allocator_objects=[MOZ])
    assert wild == ("crashes", "SIGSEGV at 0x10 in libmozjemalloc-poison.so")
    # glibc's checks always print: a silent fault in libc.so.6 is a crash, not a check
    libc = verdict(signal=signal.SIGSEGV, stderr=fault_line(signal.SIGSEGV, 0, "/lib/x86_64-linux-gnu/libc.so.6"))
    assert libc.outcome == "crashes"


def test_an_abort_or_exit_without_any_message_crashes():
    assert verdict(signal=signal.SIGABRT, stderr="some text of the program\n") == (
        "crashes", "SIGABRT without an allocator message")
    assert verdict(exit_code=3) == ("crashes", "exit 3 without an allocator message")
    assert verdict(signal=signal.SIGBUS).outcome == "crashes"


def test_the_timeout_and_the_cpu_limit_hang():
    assert verdict(timed_out=True, signal=signal.SIGKILL) == ("hangs", "killed at the timeout")
    assert verdict(signal=signal.SIGXCPU).outcome == "hangs"


def test_parse_fault_reads_faultwheres_line_and_nothing_else():
    f = parse_fault("noise\n" + fault_line(11, 0x10, "/lib/x.so", pc=0x7f01) + "\n")
    assert (f.sig, f.code, f.addr, f.pc, f.object) == (11, 1, 0x10, 0x7f01, "/lib/x.so")
    assert parse_fault("heapcost-technique: signal garbage") is None


def test_a_cells_outcome_is_the_most_frequent_ties_to_the_attacker_with_the_rate_of_works():
    row = summarize([("stopped", "glibc: free(): invalid pointer"), ("works", "held"), ("works", "held"),
                     ("stopped", "x")])
    assert row["outcome"] == "works" and row["outcomes"] == "works=2 stopped=2"
    assert (row["runs"], row["works"], row["rate"]) == (4, 2, 0.5)
    assert 0 < row["rate_ci_low"] < 0.5 < row["rate_ci_high"] < 1
    assert row["detail"] == "2/4 works: held"
    one = summarize([("crashes", "SIGSEGV")] * 3 + [("hangs", "killed")])
    assert one["outcome"] == "crashes" and one["works"] == 0 and one["rate_ci_high"] < 1
    assert summarize([])["outcome"] == "not-run"


# a static musl program's functions (start, end, name, the allocator's), as techniques.bring reads them
FUNCTIONS = ((0x401100, 0x401400, "main", False), (0x401b70, 0x401c80, "get_meta", True),
             (0x404b00, 0x404c00, "__stack_chk_fail", False))
PROGRAM = "/work/built-musl/fastbin_dup"


def static_fault(sig, code, addr, pc, insn="-"):
    return f"heapcost-technique: signal sig={sig} code={code} addr={addr:#x} pc={pc:#x} object={PROGRAM} insn={insn}"


def test_musls_failed_assertion_is_not_applicable():
    line = "Assertion failed: plaintext == (long)a (decrypt_safe_linking.c: main: 65)"
    assert allocator_message(line) is None
    assert verdict(signal=signal.SIGABRT, stderr=line + "\n") == (
        "not-applicable", "the technique's own check failed: " + line)


def test_musls_deliberate_crash_a_hlt_in_its_malloc_is_stopped():
    v = verdict(signal=signal.SIGSEGV, stderr=static_fault(11, 128, 0, 0x401b97, "f48b4818440fa3c1"),
                functions=FUNCTIONS)
    assert v == ("stopped", "SIGSEGV (general protection) in get_meta (the allocator's code): a privileged hlt there "
                            "(a deliberate crash: musl's a_crash)")


def test_a_static_programs_other_faults_crash_named_by_function():
    # mallocng's check reading a forged meta pointer: a fault in the allocator at an address it did not choose
    assert verdict(signal=signal.SIGSEGV, stderr=static_fault(11, 1, 0x10, 0x401bb5, "483948107401f40f"),
                   functions=FUNCTIONS) == ("crashes", "SIGSEGV at 0x10 in get_meta (the allocator's code)")
    # a general-protection fault at a non-canonical address, not a hlt
    assert verdict(signal=signal.SIGSEGV, stderr=static_fault(11, 128, 0, 0x401bb5, "483948107401f40f"),
                   functions=FUNCTIONS).outcome == "crashes"
    # a hlt outside the allocator (musl's stack protector) and a fault in the program's own code
    assert verdict(signal=signal.SIGSEGV, stderr=static_fault(11, 128, 0, 0x404b10, "f4"),
                   functions=FUNCTIONS).outcome == "crashes"
    assert verdict(signal=signal.SIGSEGV, stderr=static_fault(11, 1, 0x7ffd0000, 0x401318, "4889"),
                   functions=FUNCTIONS) == ("crashes", "SIGSEGV at 0x7ffd0000 in main")


def test_parse_fault_reads_faulttraces_instruction_bytes():
    f = parse_fault(static_fault(11, 128, 0, 0x401b97, "f48b"))
    assert (f.code, f.pc, f.object, f.insn) == (128, 0x401b97, PROGRAM, "f48b")
    assert parse_fault(static_fault(11, 1, 8, 0x401b97)).insn == ""
