"""The census of a library's code: instructions, rep stos string stores and calls to memset, counted from
objdump's disassembly of a library compiled in the test so that each count is known."""
import json
import subprocess

import pytest

from analysis.harness.mechanisms import code_census

DISASSEMBLY = """
0000000000006250 <memset@plt>:
    6250:\tjmp    *0x18eba(%rip)        # 1f110 <memset@GLIBC_2.2.5>

0000000000007100 <free>:
    7160:\trep stos %rax,%es:(%rdi)
    7170:\tcall   6250 <memset@plt>
    7175:\tjmp    6250 <memset@plt>
    7180:\tcall   6260 <memcpy@plt>
    7185:\tret
"""


def test_the_counts_of_a_disassembly():
    assert code_census.count(DISASSEMBLY) == {"instructions": 6, "rep_stos": 1, "memset_calls": 2, "memcpy_calls": 1}


def shared_library(tmp_path, functions: str):
    """libpoison.so compiled here from C functions that may call memset and memcpy (not folded by the compiler)."""
    src = tmp_path / "poison.c"
    src.write_text("#include <string.h>\n" + functions)
    lib = tmp_path / "libpoison.so"
    subprocess.run(["gcc", "-O2", "-fPIC", "-shared", "-fno-builtin", "-o", str(lib), str(src)], check=True)
    return lib


def test_a_library_compiled_here_has_the_calls_its_source_makes(tmp_path):
    lib = shared_library(tmp_path, "void wipe(char *p, unsigned long n) { memset(p, 0xe5, n); }\n"
                                   "void copy(char *d, const char *s, unsigned long n) { memcpy(d, s, n); }\n")
    counts = code_census.census(lib)
    assert counts["memset_calls"] == 1 and counts["memcpy_calls"] == 1 and counts["instructions"] > 2
    assert code_census.census(tmp_path / "missing.so") == {}
    (tmp_path / "text.so").write_text("not a library")
    assert code_census.census(tmp_path / "text.so") == {}


POISON_PATH = """
0000000000006250 <memset@plt>:
    6250:\tjmp    *0x18eba(%rip)        # 1f110 <memset@GLIBC_2.2.5>

0000000000007100 <fork_reset()>:
    7156:\tmov    $0xb4,%ecx
    715b:\txor    %eax,%eax
    7160:\trep stos %rax,%es:(%rdi)
    7163:\txor    %esi,%esi
    7168:\tmov    %r12,%rdi
    716b:\tcall   6250 <memset@plt>
    7170:\tret

000000000000b350 <arena_dalloc(void*, unsigned long, arena_t*)>:
    b3a1:\tmov    $0x100,%eax
    b3ad:\tmovabs $0xe5e5e5e5e5e5e5e5,%rax
    b3b7:\tcmp    $0x8,%edx
    b3c0:\tmov    %edx,%ecx
    b3c6:\tmov    %rax,(%rbx)
    b3cd:\tmov    %rax,-0x8(%rbx,%rcx,1)
    b3da:\tshr    $0x3,%ecx
    b3dd:\trep stos %rax,%es:(%rdi)
    b3e0:\tmov    0x40(%rbp),%eax
    b3e3:\trep stos %rax,%es:(%rdi)
    b3e6:\tret
"""


def test_each_window_is_merged_with_its_neighbours_and_knows_the_byte_it_fills():
    found = code_census.windows(POISON_PATH)
    # the zeroing rep stos and the memset of zero: one window that fills no constant; the two rep stos of the
    # poisoning, a line apart: one window filling 0xe5
    assert [(w["symbol"], len(w["targets"]), w["fill"]) for w in found] == [
        ("fork_reset()", 2, None), ("arena_dalloc(void*, unsigned long, arena_t*)", 2, 0xe5)]
    poison = found[1]
    assert poison["lines"][poison["targets"][0]].endswith("b3dd:\trep stos %rax,%es:(%rdi)")
    assert len(poison["lines"]) == 11  # the whole function: it is shorter than the window


def test_the_fill_of_a_window_is_the_last_immediate_written_to_the_register_the_store_takes():
    lines = ["   1:\tmov    $0xe5,%esi", "   2:\tmov    %r12,%rdi"]
    assert code_census._fill_byte(lines, ("esi",)) == (0xe5, 0)
    assert code_census._fill_byte(["   0:\tnop", "   1:\tmovabs $0xe5e5e5e5e5e5e5e5,%rax"], ("rax",)) == (0xe5, 1)
    nothing = (None, None)
    assert code_census._fill_byte(["   1:\tmov $0xe5,%esi", "   2:\txor %esi,%esi"], ("esi",)) == nothing  # zeroing
    assert code_census._fill_byte(["   1:\tmov    $0x100,%eax"], ("eax",)) == nothing  # a count, not a fill
    assert code_census._fill_byte(["   1:\tmov    %rax,(%rbx)"], ("rax",)) == nothing  # nothing written to it


def test_a_window_reaches_back_to_the_instruction_that_sets_its_fill():
    body = "".join(f"    {0x100 + k:x}:\tadd    $0x1,%rcx\n" for k in range(20))
    text = ("0000000000000f00 <poison>:\n    f00:\tmovabs $0xe5e5e5e5e5e5e5e5,%rax\n" + body
            + "    200:\trep stos %rax,%es:(%rdi)\n    203:\tret\n")
    (window,) = code_census.windows(text)
    assert window["fill"] == 0xe5 and window["lines"][0].endswith("movabs $0xe5e5e5e5e5e5e5e5,%rax")
    assert len(window["lines"]) == 23 and window["targets"] == [21]


def test_the_excerpt_keeps_the_constant_fills_first_and_says_how_many_windows_were_cut():
    text = code_census.excerpt(POISON_PATH, "libm.so", max_windows=1, sha256="ab" * 32)
    lines = text.splitlines()
    assert lines[0].startswith(f"# libm.so (sha256 {'ab' * 32}): the instructions around each rep stos")
    assert lines[1] == "# instructions 19, rep stos 3, memset calls 1, memcpy calls 0"
    assert "2 windows, 1 filling a constant non-zero byte; 1 kept" in lines[2] and lines[2].endswith("1 cut")
    assert "<arena_dalloc(void*, unsigned long, arena_t*)>, fills 0xe5:" in lines
    assert "=> b3dd:\trep stos %rax,%es:(%rdi)" in lines and "   b3ad:\tmovabs $0xe5e5e5e5e5e5e5e5,%rax" in lines
    assert "fork_reset()" not in text


def test_a_run_keeps_the_poison_path_of_a_library_compiled_here_without_a_folder_of_this_machine(tmp_path):
    from analysis.harness.timing.measure import library_identity, write_disassemblies
    from analysis.paths import machine_paths

    lib = shared_library(tmp_path, "void poison_block(char *p, unsigned long n) { memset(p, 0xe5, n < 256 ? n : 256); }\n"
                                   "void clear_block(char *p, unsigned long n) { memset(p, 0, n); }\n")
    record = library_identity("poisoner", lib)
    assert record["disassembly"] == f"disassembly/libpoison.so-{record['sha256'][:12]}.txt"
    run_dir = tmp_path / "run"
    assert write_disassemblies(run_dir, [lib, lib, tmp_path / "missing.so"]) == [record["disassembly"]]
    text = (run_dir / record["disassembly"]).read_text()
    assert machine_paths(text) == [] and str(tmp_path) not in text
    assert text.startswith(f"# libpoison.so (sha256 {record['sha256']})")
    assert "<poison_block>, fills 0xe5:" in text and "<clear_block>:" in text
    assert any(line.startswith("=> ") and "<memset@plt>" in line for line in text.splitlines())
    assert "disassembly" not in library_identity("poisoner", tmp_path / "missing.so")


def test_a_library_examined_once_is_read_back_by_the_next_process_and_a_new_copy_of_its_bytes_is_the_same(
        tmp_path, monkeypatch):
    import subprocess
    import sys

    monkeypatch.setenv("HEAPCOST_CACHE", str(tmp_path / "cache"))
    lib = shared_library(tmp_path, "void wipe(char *p, unsigned long n) { memset(p, 0xe5, n); }\n")
    first = code_census.examine(lib)
    assert first[0]["memset_calls"] == 1 and len(list((tmp_path / "cache" / "code_census").glob("*.json"))) == 1
    # another process, whose objdump tells its version and disassembles nothing, reads the same census and
    # excerpt back from the cache
    tools = tmp_path / "tools"
    tools.mkdir()
    version = subprocess.run(["objdump", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    (tools / "objdump").write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && echo '{version}' && exit 0\nexit 1\n")
    (tools / "objdump").chmod(0o755)
    code = ("import json, sys; from analysis.harness.mechanisms import code_census as c; "
            "print(json.dumps(c.examine(sys.argv[1])))")
    env = {"HEAPCOST_CACHE": str(tmp_path / "cache"), "PATH": f"{tools}:/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code, str(lib)], capture_output=True, text=True, env=env,
                         cwd=code_census.Path(code_census.__file__).parents[2], timeout=60)
    assert out.returncode == 0, out.stderr
    census, text = json.loads(out.stdout)
    assert (census, text) == (first[0], first[1])
    # a library of other bytes is examined afresh, not read from another's entry
    (tmp_path / "other").mkdir()
    other = shared_library(tmp_path / "other", "void wipe(char *p, unsigned long n) { memset(p, 0, n); memset(p, 1, n); }\n")
    assert code_census.examine(other)[0]["memset_calls"] == 2
