"""docs/runs.md: the published runs' history, generated from their own records."""

def test_the_runs_history_page_is_generated_from_the_runs_own_records():
    from analysis.paths import DATA_DIR, REPO
    from analysis.publish.dataset import run_history

    assert (REPO / "docs" / "runs.md").read_text() == run_history.markdown(DATA_DIR), \
        "docs/runs.md is stale: run `make dataset` (or python -m analysis dataset)"


def test_a_runs_command_names_the_make_variables_it_was_made_with():
    from analysis.publish.dataset import run_history

    info = {"kind": "time", "params": {"profile": "quick", "protocol": "lockstep", "allocators": ["glibc", "hm"],
                                       "workloads": ["build"], "extra_allocators": "hm={elsewhere}/libhm.so"}}
    assert run_history.command(info) == ("make measure PROFILE=quick PROTOCOL=lockstep ALLOCATORS=glibc "
                                         "WORKLOADS=build EXTRA_ALLOCATORS=hm={elsewhere}/libhm.so")
    # a run in longer turns says so, as measure takes it
    info["params"]["slice_us"] = 100000
    assert "PROTOCOL=lockstep SLICE_US=100000 ALLOCATORS" in run_history.command(info)



def test_a_runs_direct_pairs_are_given_as_pairs_takes_them():
    """PAIRS=a:b,c:d, as measure parses it (lockstep.parse_pairs), so the command runs as printed."""
    from analysis.harness.timing import lockstep
    from analysis.publish.dataset import run_history

    recorded = [["mozjemalloc", "mozjemalloc-poison"], ["glibc-no-tcache-key", "glibc-built"]]
    info = {"kind": "time", "params": {"protocol": "lockstep", "pairs": recorded,
                                       "allocators": ["glibc", "mozjemalloc", "mozjemalloc-poison", "glibc-built",
                                                      "glibc-no-tcache-key"], "workloads": ["dom-churn"]}}
    command = run_history.command(info)
    assert "PAIRS=mozjemalloc:mozjemalloc-poison,glibc-no-tcache-key:glibc-built " in command
    value = command.split("PAIRS=")[1].split()[0]
    selected = info["params"]["allocators"]
    assert lockstep.parse_pairs(value, selected, set(selected), "glibc") == [tuple(p) for p in recorded]


def test_a_mechanism_runs_command_is_the_one_with_its_options():
    from analysis.publish.dataset import run_history

    info = {"kind": "mechanism", "params": {"sizes": [16, 256], "blocks": 40, "target_us": 5000, "heap_kib": 2048,
                                            "sequences": ["rep-stosb", "memset-call"], "pin": "auto"}}
    assert run_history.command(info) == ("python -m analysis mechanism --sizes 16,256 --blocks 40 --target-us 5000 "
                                         "--heap-kib 2048 --sequences rep-stosb,memset-call")
