"""The allocation profile's table (`python -m analysis profile -- PROGRAM ARGS`, analysis/harness/workloads/profile.py):
its columns, and every quantity with its unit, whether it is given per size class, and what it is.

A tidy table, one row per quantity and, for the quantities given per size class, one more per class. For any
program it is written on demand, beside the user's own files, and is no table of the dataset. heapcost's own
workloads profiled on a host (`python -m analysis profile --workloads ...`) make a run of their own (kind
`profile`) whose profiles.csv (PROFILE_RUN: the same rows, each with its run and workload) is a table of the
dataset, listed in the codebook of data/; docs/design.md (the allocation profile) describes both.
"""
from analysis.contract.fields import field as _f

PROFILE_ENTRY_POINTS = ("malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign", "aligned_alloc",
                        "memalign", "valloc", "pvalloc")
SIZE_CLASSES = ("A power of two named by its upper bound: class 1 holds 1 byte, class 2 holds 2 bytes, class "
                "2^k the sizes 2^(k-1)+1 to 2^k (24 bytes are class 32, 4000 bytes class 4096); class 0 holds "
                "0 bytes.")
_COUNTING = "the counting run (allocprofile.c preloaded)"
_SYSCALLS = ("the system-call run (strace -f, every process and thread; the loader's and the program's own calls "
             "included, so not the allocator's alone); absent when strace is not installed")


def _profile_quantities() -> dict:
    """quantity -> (unit, given per size class, what it is)."""
    q = {
        "processes": ("count", False, f"Processes of {_COUNTING} that reported: each reports when it exits "
                      "(exit, return from main, _exit); one killed by a signal reports nothing, a vfork() child "
                      "neither (its calls are its parent's)."),
        "threads": ("count", False, "Threads that made at least one allocation call, summed over processes."),
        "peak_live_bytes": ("bytes", False, "The most requested bytes live at once in one process (the largest "
                            "over processes); what was asked for, not what the allocator used."),
        "peak_live_blocks": ("count", True, "The most blocks of the class live at once in one process (the largest "
                             "over processes): how many blocks of a class a program holds together; no total."),
        "reuse_window": ("allocations", False, "The reuse window: a free counts as reused when one of the next "
                         "this many allocations of the same thread asks for its size class."),
    }
    for entry in PROFILE_ENTRY_POINTS:
        what = {"free": "calls of free with a pointer the shim saw allocated, by the class of the size asked for "
                        "at allocation (the total adds free_untracked_calls)",
                "realloc": "calls by the class of the new size (realloc of NULL included)",
                "reallocarray": "calls by the class of the new size (n * size)",
                "calloc": "calls by the class of n * size"}.get(entry, "calls by the class of the size asked for")
        q[f"{entry}_calls"] = ("count", True, f"{entry}: {what}; size_class empty: all classes.")
    q.update({
        "free_null_calls": ("count", False, "Calls of free(NULL) (glibc's own thread exit makes some)."),
        "free_untracked_calls": ("count", False, "Frees of blocks the shim did not see allocated (before it "
                                 "resolved glibc's functions): counted without a class."),
        "alloc_failed": ("count", False, "Allocation calls that returned no memory for a non-zero size."),
        "frees_reused": ("count", True, "Frees (in free_calls) taken again: one of the next reuse_window "
                         "allocations of the freeing thread (malloc, calloc, the aligned ones, realloc of NULL) "
                         "asked for the same class. Each allocation takes at most one free, the oldest of its "
                         "class still in the window, which pairs as many as any order could."),
        "frees_reused_same_size": ("count", True, "Of frees_reused, those whose allocation asked for exactly the "
                                   "size of the latest free of its class in that thread: the block a free list "
                                   "of one size hands back first (glibc's bins above its tcache sort a block of "
                                   "another size, stats/cost_model.py's same-size cells)."),
        "reuse_share": ("share", True, "frees_reused / free_calls of the class; empty size_class: of all "
                        "classes, free_untracked_calls left out. Absent when there was no such free."),
        "realloc_grow": ("count", False, "realloc and reallocarray calls to a larger requested size."),
        "realloc_shrink": ("count", False, "... to a smaller requested size (not 0)."),
        "realloc_same": ("count", False, "... to the same requested size."),
        "realloc_from_null": ("count", False, "... of NULL (an allocation)."),
        "realloc_to_zero": ("count", False, "... to size 0 (glibc frees the block)."),
        "realloc_untracked": ("count", False, "... of a block the shim did not see allocated (growth unknown)."),
        "realloc_failed": ("count", False, "... that returned NULL for a non-zero size (the block stays)."),
        "realloc_moved": ("count", False, "Of the grow, shrink and same calls, those whose block moved."),
        "realloc_grown": ("count", True, "realloc_grow by the class of the new size (absent in profiles made "
                          "before it); size_class empty: all classes."),
        "realloc_grown_moved": ("count", True, "Of realloc_grown, those whose block moved, by the class of the new "
                                "size: where a program's growing buffers move under the baseline and where they "
                                "grow in place (stats/cost_model.fresh_calls)."),
        "realloc_grown_pages": ("count", True, "Of realloc_grown, those whose new size needs more 4 KiB pages than "
                                "the old, by the class of the new size: a large block that an allocator moves "
                                "when it outgrows its pages (stats/cost_model.grown_pairs)."),
        "realloc_grown_in_place": ("count", True, "Of realloc_grown_pages, those whose block did not move, by the "
                                   "class of the new size: the grows an allocator that moves a large block pays "
                                   "where the baseline did not (stats/cost_model.grown_pairs)."),
        "realloc_grown_in_place_pages": ("count", True, "The 4 KiB pages realloc_grown_in_place added, by the "
                                         "class of the new size: how far such a block grows a step, which sets "
                                         "what an allocator that moves it only across its own size classes pays."),
        "realloc_moved_bytes": ("bytes", False, "Bytes the moves copied: the smaller of the old and the new "
                                "requested size, summed over realloc_moved."),
        "realloc_grow_factor_le2": ("count", False, "Of realloc_grow, new size / old size at most 2."),
        "realloc_grow_factor_le4": ("count", False, "... above 2, at most 4."),
        "realloc_grow_factor_le8": ("count", False, "... above 4, at most 8."),
        "realloc_grow_factor_gt8": ("count", False, "... above 8 (or from a block of 0 bytes)."),
        "syscall_tasks": ("count", False, f"Processes and threads traced in {_SYSCALLS}."),
        "mmap_calls": ("count", False, f"Successful mmap calls in {_SYSCALLS}."),
        "mmap_anon_bytes": ("bytes", False, "Bytes mapped anonymous, readable or writable, at an address the "
                            "kernel chose, not a stack: glibc's large blocks and heaps, the program's own."),
        "mmap_reserve_bytes": ("bytes", False, "Bytes mapped anonymous with PROT_NONE: address space reserved "
                               "(glibc's thread arenas), made usable later by mprotect."),
        "mmap_stack_bytes": ("bytes", False, "Bytes mapped with MAP_STACK (thread stacks)."),
        "mmap_other_bytes": ("bytes", False, "Bytes mapped from files or at a fixed address (the loader's "
                             "libraries)."),
        "munmap_calls": ("count", False, "Successful munmap calls."),
        "munmap_bytes": ("bytes", False, "Bytes unmapped."),
        "brk_calls": ("count", False, "brk calls (brk(NULL), which reads the break, included)."),
        "brk_grow_bytes": ("bytes", False, "Bytes the break moved up, from the break the same task saw "
                           "before (a task's first move, when it never read the break, is not counted)."),
        "brk_shrink_bytes": ("bytes", False, "Bytes the break moved down, counted the same way."),
        "mremap_calls": ("count", False, "Successful mremap calls."),
        "mremap_grow_bytes": ("bytes", False, "Bytes mremap added (new size - old size, when larger)."),
        "mremap_shrink_bytes": ("bytes", False, "Bytes mremap removed."),
        "mprotect_calls": ("count", False, "Successful mprotect calls."),
        "mprotect_rw_bytes": ("bytes", False, "Bytes mprotect made readable and writable (glibc growing a "
                              "thread arena inside its reservation, or making a new thread's stack usable)."),
        "madvise_calls": ("count", False, "Successful madvise calls."),
        "madvise_release_bytes": ("bytes", False, "Bytes given back by madvise MADV_DONTNEED, MADV_FREE or "
                                  "MADV_REMOVE (the allocator returning pages it keeps mapped; glibc a finished "
                                  "thread's stack)."),
        "timed_runs": ("count", False, "Runs of the program with nothing preloaded (heapcost's launcher); the "
                       "times below are their medians, each quantity's own."),
        "timed_blocks": ("count", False, "The blocks those runs came in, back to back within a block, the "
                         "blocks and the system-call run in an order drawn at random after the counting run "
                         "(absent in profiles made before blocks: one block)."),
        "timed_pinned": ("count", False, "1 when those runs were pinned to one CPU with heapcost on the "
                         "others, 0 when not (a program with threads, or a machine with one CPU)."),
        "wall_s": ("s", False, "Wall time of those runs, the median (CLOCK_MONOTONIC): a few runs of one "
                   "machine state, not a measurement with an interval."),
        "user_s": ("s", False, "User CPU time of those runs, the median (wait4 rusage)."),
        "sys_s": ("s", False, "System CPU time of those runs, the median."),
        "cpu_sd_log": ("log", False, "The standard deviation of the natural log of those runs' CPU times (user + "
                       "system): their run-to-run spread (0 for one run)."),
        "cpu_sd_log_blocks": ("log", False, "The standard deviation of the blocks' mean log CPU times: how far "
                              "the baseline moved across the profile's run (absent with one block)."),
        "maxrss_kb": ("KiB", False, "Peak resident set size of those runs, the median (ru_maxrss)."),
        "placement_runs": ("count", False, "Runs under heapcost's placement allocator (placement.c) in each of its "
                           "two modes, one of each beside every timed run, in its block, the three in an order drawn "
                           "for each turn (absent in profiles made before it, or made without it)."),
        "placement_ordered_cpu_s": ("s", False, "CPU time (user + system) under the placement allocator laying each "
                                    "class's blocks side by side in allocation order, the median of those runs."),
        "placement_shuffled_cpu_s": ("s", False, "CPU time under the same allocator taking each block at random "
                                     "among its class's free slots nearest the slab being carved, the median."),
        "placement_ordered_sd_log": ("log", False, "The standard deviation over the turns of log(ordered CPU time "
                                     "/ CPU time with nothing preloaded), each turn's runs paired."),
        "placement_shuffled_sd_log": ("log", False, "The same of log(shuffled CPU time / ordered CPU time)."),
    })
    return q


PROFILE_QUANTITIES = _profile_quantities()
PROFILE = [
    _f("quantity", "string", "What is counted or timed (PROFILE_QUANTITIES in analysis/contract/profile_schema.py; "
       "docs/design.md, the allocation profile).", required=True, enum=list(PROFILE_QUANTITIES)),
    _f("size_class", "integer", "The size class of a per-class row, empty for a total. " + SIZE_CLASSES,
       "bytes", minimum=0),
    _f("value", "number", "The count, bytes, share or seconds (the quantity's unit).", required=True, minimum=0),
]
PROFILE_COLUMNS = [f["name"] for f in PROFILE]

RUN_KIND, RUN_TABLE = "profile", "profiles.csv"  # a run of heapcost's own workloads' profiles, and its table
PROFILE_RUN = [
    _f("run_id", "string", "The profile run (directory name).", required=True),
    _f("workload", "string", "The heapcost workload profiled (analysis/harness/workloads/builtin.py), run as a time "
       "run runs it under the system glibc; in a run labelled programs, the cost check's program "
       "(analysis/harness/workloads/cost_programs.py) on its input.", required=True),
    _f("scale", "number", "The workload's scale in the profile's runs (the scale of the time runs whose cells "
       "the profile predicts).", required=True, minimum=0),
    *PROFILE,
]
PROFILE_RUN_COLUMNS = [f["name"] for f in PROFILE_RUN]
