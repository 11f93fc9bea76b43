"""The probe outcome rules (analysis/probe_verdict.py), one test per rule, on hand-written stderr/stdout
fixtures: nothing is built or run. The audit's cases are among them."""
import signal

import pytest

from analysis.harness.security.probe_verdict import parse_fault, parse_stderr, verdict

GLIBC = ("/lib/x86_64-linux-gnu/libc.so.6",)
MIMALLOC = ("/opt/allocators/mimalloc2/lib/libmimalloc.so.2",)
EFENCE = ("/usr/lib/libefence.so.0",)
PROBE = "/build/probe-uaf-read-0123"


def err(*lines):
    return "\n".join(lines) + "\n"


def stage(name):
    return f"heapcost-probe: stage={name}"


def fault(sig, code, addr, pc, obj, at, call="-", sym="-"):
    return (f"heapcost-probe: signal sig={int(sig)} code={code} addr={addr} pc={pc} object={obj} stage={at} "
            f"call={call} sym={sym}")


# ------------------------------------------------------------------------------------------ n/a
def test_setup_failure_is_na():
    v = verdict(exit_code=99, stderr=err("heapcost-probe: setup-failed malloc(48) returned NULL"))
    assert v == ("n/a", "probe setup failed: malloc(48) returned NULL")


def test_not_applicable_at_a_size_is_na():
    out = "result worked=0 applicable=0 size=262144 reason=beyond-64-bytes-this-is-a-plain-overflow\n"
    v = verdict(exit_code=0, stdout=out, stderr=err(stage("checked"), stage("done")))
    assert v.outcome == "n/a"
    assert "262144" in v.detail and "beyond-64-bytes" in v.detail


def test_normal_end_without_a_result_is_na():
    v = verdict(exit_code=0, stderr=err(stage("setup-done"), stage("misuse-done")))
    assert v.outcome == "n/a"


# ------------------------------------------------------------------------------------------ failed to start
def test_death_before_setup_done_is_allocator_failed_to_start_with_its_first_line():
    # hardened_malloc under a tight address-space limit: it dies reserving its state, before main.
    stderr = err("fatal allocator error: failed to reserve allocator state",
                 fault(signal.SIGABRT, -6, "-", "0x7f0000001234", "-", "-"))
    v = verdict(signal=signal.SIGABRT, stderr=stderr, allocator_objects=("/opt/hm/libhardened_malloc.so",))
    assert v.outcome == "allocator-failed-to-start"
    assert v.detail.endswith("fatal allocator error: failed to reserve allocator state")


def test_a_fault_in_the_probes_setup_outside_the_allocator_is_not_a_failure_to_start():
    # efence, 256 KiB block: glibc's malloc_usable_size reads a header efence never wrote, on a guard page
    stderr = err("Electric Fence 2.2 Copyright (C) 1987-1999 Bruce Perens <bruce@perens.com>",
                 fault(signal.SIGSEGV, 2, "0x7f82cde41ff8", "0x7f0000001234", GLIBC[0], "-",
                       sym="malloc_usable_size"))
    v = verdict(signal=signal.SIGSEGV, stderr=stderr, allocator_objects=EFENCE)
    assert v.outcome == "n/a" and "setup broke outside the allocator" in v.detail
    # the same fault inside the allocator's own object is its failure to start
    assert verdict(signal=signal.SIGSEGV, stderr=stderr, allocator_objects=GLIBC).outcome == \
        "allocator-failed-to-start"


# ------------------------------------------------------------------------------------------ a legal request refused
EFENCE_BANNER = "  Electric Fence 2.2 Copyright (C) 1987-1999 Bruce Perens <bruce@perens.com>"
EFENCE_CHATTER = {"Electric Fence #.# Copyright (C) #-# Bruce Perens <bruce@perens.com>"}
LEGAL = "heapcost-probe: stage=legal-request what=malloc(0)"


def test_an_allocator_refusing_the_legal_request_with_its_diagnostic_is_caught_not_a_failed_start():
    # efence, malloc-zero: the allocator served 32 neighbours, then refused malloc(0) and killed the
    # process with SIGILL (EF_Abort): the zero-size block the misuse needs never existed.
    stderr = err(EFENCE_BANNER, LEGAL, "ElectricFence Aborting: Allocating 0 bytes, probably a bug.",
                 fault(signal.SIGILL, 0, "0x7c58", "0x7f22aa0451f7", GLIBC[0], "legal-request", "malloc", "kill"))
    v = verdict(signal=signal.SIGILL, stderr=stderr, allocator_objects=EFENCE, chatter=EFENCE_CHATTER)
    assert v.outcome == "caught"
    assert v.detail.startswith("refused malloc(0): reported: ElectricFence Aborting: Allocating 0 bytes")
    assert "SIGILL code=0 (SI_USER)" in v.detail and "during malloc at stage legal-request" in v.detail


def test_a_silent_abort_or_exit_of_the_allocator_inside_the_legal_request_is_caught():
    abort = err(LEGAL, fault(signal.SIGABRT, -6, "-", "0x7f00", EFENCE[0], "legal-request", "malloc"))
    v = verdict(signal=signal.SIGABRT, stderr=abort, allocator_objects=EFENCE)
    assert v.outcome == "caught" and v.detail.startswith("refused malloc(0): SIGABRT")
    v = verdict(exit_code=1, stderr=err(LEGAL))
    assert v == ("caught", "refused malloc(0): exit 1")


def test_a_silent_fault_or_a_hang_inside_the_legal_request_is_na():
    # not a diagnostic: the allocator broke on a legal request, which says nothing about the misuse
    segv = err(LEGAL, fault(signal.SIGSEGV, 1, "0x10", "0x7f00", EFENCE[0], "legal-request", "malloc"))
    v = verdict(signal=signal.SIGSEGV, stderr=segv, allocator_objects=EFENCE)
    assert v.outcome == "n/a" and "broke on malloc(0), a legal request" in v.detail
    hang = err(LEGAL, "some allocator text",
               fault(signal.SIGALRM, 128, "0x0", "0x7f00", EFENCE[0], "legal-request", "malloc"))
    assert verdict(signal=signal.SIGALRM, stderr=hang, allocator_objects=EFENCE).outcome == "n/a"


def test_a_death_after_the_legal_request_returned_is_not_a_refusal():
    # legal-request-done: the request was served; a death later in the setup follows the older rules
    stderr = err(LEGAL, stage("legal-request-done"), "ElectricFence Aborting: something else",
                 fault(signal.SIGILL, 0, "0x7c58", "0x7f00", GLIBC[0], "legal-request-done", "malloc", "kill"))
    v = verdict(signal=signal.SIGILL, stderr=stderr, allocator_objects=EFENCE)
    assert v.outcome == "allocator-failed-to-start" and "refused" not in v.detail


def test_the_legal_request_stage_line_parses_its_request():
    t = parse_stderr(err(LEGAL, stage("legal-request-done"), stage("setup-done")))
    assert t.stages == ["legal-request", "legal-request-done", "setup-done"]
    assert t.request == "malloc(0)" and t.messages == []


# ------------------------------------------------------------------------------------------ missed
def test_primitive_achieved_and_ran_on_is_missed_with_the_step():
    out = "result worked=1 size=48 step=2 first_return=1 made=2 same_start=1\n"
    v = verdict(exit_code=0, stdout=out,
                stderr=err(stage("setup-done"), stage("misuse-done"), stage("primitive"), stage("checked"),
                           stage("done")))
    assert v.outcome == "missed"
    assert "step=2" in v.detail


def test_audit_mimalloc_fault_on_its_own_freelist_pointer_after_the_primitive_is_missed():
    # The audit's case: mi_malloc dereferences 0x1f1f1f1f1f1f1f1f, a link the probe wrote into a block
    # still on the free list: the attacker already steers the allocator. The crash is recorded beside it.
    stderr = err(stage("setup-done"), stage("misuse-done"), stage("primitive"),
                 fault(signal.SIGSEGV, 128, "0x0", "0x7f12aa001234", MIMALLOC[0], "primitive", "malloc",
                       "mi_malloc_generic"))
    v = verdict(signal=signal.SIGSEGV, stderr=stderr, allocator_objects=MIMALLOC)
    assert v.outcome == "missed"
    assert "SIGSEGV" in v.detail and "libmimalloc.so.2" in v.detail and "mi_malloc_generic" in v.detail


def test_audit_mimalloc_fault_at_a_1f_address_in_the_allocator_after_primitive_is_missed():
    stderr = err(stage("setup-done"), stage("misuse-done"), stage("primitive"),
                 fault(signal.SIGSEGV, 1, "0x1f1f1f1f1f1f1f1f", "0x7f12aa001234", MIMALLOC[0], "primitive",
                       "malloc"))
    v = verdict(signal=signal.SIGSEGV, stderr=stderr, allocator_objects=MIMALLOC)
    assert v.outcome == "missed"
    assert "addr=0x1f1f1f1f1f1f1f1f" in v.detail


def test_audit_efence_calloc_returned_the_block_then_faulted_in_the_allocator_is_missed():
    # calloc-overflow: the wrapped calloc returned a block (primitive), then efence crashed in
    # Page_AllowAccess during the second calloc.
    stderr = err("  Electric Fence 2.2 Copyright (C) 1987-1999 Bruce Perens <bruce@perens.com>",
                 stage("setup-done"), stage("misuse-done"), stage("primitive"),
                 fault(signal.SIGSEGV, 1, "0x7f0000000000", "0x7f33cc000abc", EFENCE[0], "primitive", "calloc",
                       "Page_AllowAccess"))
    chatter = {"Electric Fence #.# Copyright (C) #-# Bruce Perens <bruce@perens.com>"}
    v = verdict(signal=signal.SIGSEGV, stderr=stderr, allocator_objects=EFENCE, chatter=chatter)
    assert v.outcome == "missed"
    assert "Page_AllowAccess" in v.detail and "calloc" in v.detail


def test_audit_allocator_message_before_the_check_while_the_attack_worked_is_missed():
    # The allocator printed a report before the check, but the program ran on and the primitive worked:
    # detected silently (or too late), not caught.
    stderr = err(stage("setup-done"), "mimalloc: error: double free detected of block 0x7f00 with size 48",
                 stage("misuse-done"), stage("primitive"), stage("checked"), stage("done"))
    v = verdict(exit_code=0, stdout="result worked=1 size=48 step=70\n", stderr=stderr, allocator_objects=MIMALLOC)
    assert v.outcome == "missed"
    assert "double free detected" in v.detail


# ------------------------------------------------------------------------------------------ hung
def test_a_hang_without_the_primitive_is_late_crash_naming_the_call():
    stderr = err(stage("setup-done"), stage("misuse-done"),
                 fault(signal.SIGALRM, 128, "0x0", "0x7fdfbc081fb7", "/usr/lib/libjemalloc.so.2", "misuse-done",
                       "malloc"))
    v = verdict(signal=signal.SIGALRM, stderr=stderr, allocator_objects=("/usr/lib/libjemalloc.so.2",))
    assert v.outcome == "late-crash"
    assert "hung" in v.detail and "malloc" in v.detail


@pytest.mark.parametrize("kind, says", [("stall", "one allocator call stopped returning"),
                                        ("deadline", "still running at the probe's deadline")])
def test_the_watchdog_record_says_which_kind_of_hang(kind, says):
    record = fault(signal.SIGALRM, 128, "0x0", "0x7f00", "/usr/lib/libjemalloc.so.2", "misuse-done", "malloc",
                   "je_malloc") + f" hang={kind}"
    assert parse_fault(record.split("heapcost-probe: ", 1)[1]).sym == "je_malloc"
    v = verdict(signal=signal.SIGALRM, stderr=err(stage("setup-done"), stage("misuse-done"), record),
                allocator_objects=("/usr/lib/libjemalloc.so.2",))
    assert v.outcome == "late-crash" and says in v.detail and "inside malloc (libjemalloc.so.2)" in v.detail


def test_a_runner_timeout_without_a_record_is_late_crash():
    v = verdict(timed_out=True, signal=signal.SIGKILL, stderr=err(stage("setup-done"), stage("misuse-done")))
    assert v.outcome == "late-crash"
    assert "timeout" in v.detail


# ------------------------------------------------------------------------------------------ caught
def test_allocator_message_and_abort_before_the_primitive_is_caught():
    stderr = err(stage("setup-done"), "free(): double free detected in tcache 2",
                 fault(signal.SIGABRT, -6, "-", "0x7ff7333eceec", GLIBC[0], "setup-done", "free"))
    v = verdict(signal=signal.SIGABRT, stderr=stderr, allocator_objects=GLIBC)
    assert v.outcome == "caught"
    assert v.detail.startswith("reported: free(): double free detected in tcache 2")
    assert "SIGABRT" in v.detail


def test_allocator_message_and_run_on_without_the_primitive_is_caught():
    # mimalloc-secure with MIMALLOC_SHOW_ERRORS=1: it reports the double free and neutralises it.
    stderr = err(stage("setup-done"), "mimalloc: error: double free detected of block 0x7f00 with size 48",
                 stage("misuse-done"), stage("checked"), stage("done"))
    v = verdict(exit_code=0, stdout="result worked=0 size=48 step=0 made=100000\n", stderr=stderr)
    assert v.outcome == "caught"
    assert "ran on" in v.detail


def test_message_only_after_the_check_is_caught_and_says_so():
    stderr = err(stage("setup-done"), stage("misuse-done"), stage("checked"), "ERROR: quarantine: corrupted block",
                 fault(signal.SIGABRT, -6, "-", "0x1", "/opt/q/libq.so", "checked", "free"))
    v = verdict(signal=signal.SIGABRT, stdout="result worked=0 size=64\n", stderr=stderr)
    assert v.outcome == "caught"
    assert "after the check" in v.detail


def test_silent_abort_inside_an_allocator_call_is_caught():
    stderr = err(stage("setup-done"), fault(signal.SIGABRT, -6, "-", "0x7f00", "/opt/s/libscudo.so", "setup-done",
                                            "free"))
    v = verdict(signal=signal.SIGABRT, stderr=stderr, allocator_objects=("/opt/s/libscudo.so",))
    assert v.outcome == "caught"
    assert "libscudo.so" in v.detail and "during free" in v.detail


def test_trap_with_pc_in_the_allocator_is_caught():
    stderr = err(stage("setup-done"), stage("misuse-done"),
                 fault(signal.SIGILL, 2, "0x7f1234", "0x7f1234", "/opt/h/libhardened_malloc.so", "misuse-done",
                       "-", "fatal_error"))
    v = verdict(signal=signal.SIGILL, stderr=stderr, allocator_objects=("/opt/h/libhardened_malloc.so",))
    assert v.outcome == "caught"


def test_segfault_with_pc_in_the_allocator_before_the_primitive_is_caught():
    stderr = err(stage("setup-done"),
                 fault(signal.SIGSEGV, 1, "0x7f9cd6cf2008", "0x7f9cd71def0a", GLIBC[0], "setup-done", "free",
                       "__libc_free"))
    v = verdict(signal=signal.SIGSEGV, stderr=stderr, allocator_objects=("libc.so.6",))
    assert v.outcome == "caught"
    assert "SEGV_MAPERR" in v.detail and "libc.so.6" in v.detail


def test_audit_musl_static_fault_in_free_is_caught_by_its_call():
    # Statically linked musl: the allocator's code is in the probe executable; call=free tells it apart.
    stderr = err(stage("setup-done"), fault(signal.SIGSEGV, 128, "0x0", "0x403585", PROBE, "setup-done", "free"))
    v = verdict(signal=signal.SIGSEGV, stderr=stderr, allocator_objects=())
    assert v.outcome == "caught"


def test_guard_page_fault_at_the_misusing_access_is_caught():
    stderr = err("heapcost-probe: target lo=0x7f0000010000 hi=0x7f0000010001", stage("setup-done"),
                 fault(signal.SIGSEGV, 2, "0x7f0000010000", "0x55550000120a", PROBE, "setup-done"))
    v = verdict(signal=signal.SIGSEGV, stderr=stderr, allocator_objects=EFENCE)
    assert v.outcome == "caught"
    assert "guard page" in v.detail


def test_audit_musl_unmapped_group_fault_at_the_stale_read_itself_is_caught():
    # Decision: when the stale read itself faults (before misuse-done, inside the freed block) because
    # the allocator gave the memory back, the access did not happen: caught ("memory given back").
    stderr = err("heapcost-probe: target lo=0x7f4930244190 hi=0x7f4930284180", stage("setup-done"),
                 fault(signal.SIGSEGV, 1, "0x7f4930244190", "0x4021a6", PROBE, "setup-done"))
    v = verdict(signal=signal.SIGSEGV, stderr=stderr)
    assert v.outcome == "caught"
    assert "given back to the kernel" in v.detail


def test_silent_nonzero_exit_before_the_check_is_caught():
    v = verdict(exit_code=1, stderr=err(stage("setup-done"), stage("misuse-done")))
    assert v.outcome == "caught"


# ------------------------------------------------------------------------------------------ late-crash
def test_audit_musl_unmapped_group_fault_in_the_probe_after_misuse_done_is_late_crash():
    # The same unmapped group, but the fault comes from the probe's checking code after the misuse:
    # nothing the allocator decided stopped the misuse, the program just broke.
    stderr = err("heapcost-probe: target lo=0x7f4930244190 hi=0x7f4930284180", stage("setup-done"),
                 stage("misuse-done"), fault(signal.SIGSEGV, 1, "0x7f4930250000", "0x4021f0", PROBE, "misuse-done"))
    v = verdict(signal=signal.SIGSEGV, stderr=stderr)
    assert v.outcome == "late-crash"
    assert "probe's own code" in v.detail


def test_fault_in_the_probe_outside_the_target_before_misuse_done_is_late_crash():
    stderr = err("heapcost-probe: target lo=0x7f0000010000 hi=0x7f0000010001", stage("setup-done"),
                 fault(signal.SIGSEGV, 1, "0x10", "0x55550000120a", PROBE, "setup-done"))
    assert verdict(signal=signal.SIGSEGV, stderr=stderr, allocator_objects=GLIBC).outcome == "late-crash"


def test_crash_without_a_fault_record_is_late_crash():
    v = verdict(signal=signal.SIGSEGV, stderr=err(stage("setup-done"), stage("misuse-done")))
    assert v.outcome == "late-crash"


def test_nonzero_exit_after_the_check_is_late_crash():
    v = verdict(exit_code=3, stdout="result worked=0 size=16\n",
                stderr=err(stage("setup-done"), stage("misuse-done"), stage("checked")))
    assert v.outcome == "late-crash"


# ------------------------------------------------------------------------------------------ mitigated
def test_ran_on_and_primitive_not_achieved_is_mitigated():
    v = verdict(exit_code=0, stdout="result worked=0 size=48 step=0 first_return=1 made=100000\n",
                stderr=err(stage("setup-done"), stage("misuse-done"), stage("checked"), stage("done")))
    assert v.outcome == "mitigated"
    assert "made=100000" in v.detail


def test_routine_chatter_is_not_a_report():
    stderr = err("jemalloc banner 5.3.0", stage("setup-done"), stage("misuse-done"), stage("checked"), stage("done"))
    v = verdict(exit_code=0, stdout="result worked=0 size=64\n", stderr=stderr, chatter={"jemalloc banner #.#.#"})
    assert v.outcome == "mitigated"


# ------------------------------------------------------------------------------------------ parsing
def test_fault_line_parses_every_field():
    f = parse_fault("signal sig=11 code=1 addr=0x7f9cd6cf2008 pc=0x7f9cd71def0a "
                    "object=/lib/x86_64-linux-gnu/libc.so.6 stage=setup-done call=free sym=__libc_free")
    assert (f.sig, f.code, f.addr, f.pc) == (11, 1, 0x7F9CD6CF2008, 0x7F9CD71DEF0A)
    assert (f.object, f.stage, f.call, f.sym) == ("/lib/x86_64-linux-gnu/libc.so.6", "setup-done", "free",
                                                  "__libc_free")
    abort = parse_fault("signal sig=6 code=-6 addr=- pc=0x7f00 object=- stage=- call=- sym=-")
    assert abort.addr is None and abort.object == "-"


def test_messages_carry_the_stage_they_followed():
    t = parse_stderr(err("banner", stage("setup-done"), "oops", stage("misuse-done"), stage("checked"), "late"),
                     chatter={"banner"})
    assert t.messages == [("oops", "setup-done"), ("late", "checked")]
    assert t.stages == ["setup-done", "misuse-done", "checked"]


def test_a_message_without_its_newline_keeps_the_fault_record_that_follows_it():
    stderr = ("heapcost-probe: stage=setup-done\nfree(): invalid pointer"
              + fault(signal.SIGABRT, -6, "-", "0x7f00", GLIBC[0], "setup-done", call="free") + "\n")
    trace = parse_stderr(stderr)
    assert trace.messages == [("free(): invalid pointer", "setup-done")]
    assert trace.fault is not None and trace.fault.call == "free"
    v = verdict(signal=signal.SIGABRT, stderr=stderr, allocator_objects=GLIBC)
    assert v.outcome == "caught" and v.detail.startswith("reported: free(): invalid pointer; SIGABRT")
