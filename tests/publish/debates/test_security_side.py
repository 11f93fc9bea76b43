"""What each debate's defence buys: the primary pair's probe cases side by side, from probe rows made up here."""
import pandas as pd

from analysis.publish.debates import security_side


def row(allocator, probe, size, outcome, bits="", lo="", hi=""):
    return {"allocator": allocator, "probe": probe, "size": size, "outcome": outcome, "bits": bits,
            "bits_ci_low": lo, "bits_ci_high": hi}


ROWS = [row("poison", "uaf-read", "16", "mitigated"), row("plain", "uaf-read", "16", "missed"),
        row("poison", "uaf-read", "4096", "missed"), row("plain", "uaf-read", "4096", "missed"),
        row("poison", "double-free", "16", "missed"), row("plain", "double-free", "16", "caught"),
        row("poison", "wild-free", "", "n/a"), row("plain", "wild-free", "", "caught"),
        row("poison", "reuse-entropy", "", "mitigated", "9.0", "8.5", "9.5"),
        row("plain", "reuse-entropy", "", "missed", "0.0", "0.0", "0.1"),
        row("poison", "address-entropy", "", "mitigated", "26.6", "25", "28"),
        row("plain", "address-entropy", "", "mitigated", "27.0", "25", "28"),
        row("omalloc-1.299", "uaf-read", "16", "caught"), row("omalloc-1.299", "double-free", "16", "mitigated"),
        row("perl-mymalloc", "uaf-read", "16", "n/a")]


def test_cases_are_counted_safer_less_safe_or_the_same_and_n_a_left_out():
    r = security_side.compare(ROWS, "poison", "plain")
    assert (r["cases"], r["better"], r["worse"], r["same"]) == (3, 1, 1, 1)
    assert r["better_probes"] == "uaf-read at 16 B (missed -> mitigated)"
    assert r["worse_probes"] == "double-free at 16 B (caught -> missed)"
    # entropy: only the probe whose intervals are apart is said to move
    assert "reuse-entropy 0.0 -> 9.0 bits" in r["words"] and "address-entropy 27.0" not in r["words"]
    assert r["words"].startswith("safer in 1 and less safe in 1 of 3 probe cases (safer: uaf-read (1 size))")
    assert r["unmeasured"] == ""


def test_a_layout_build_is_probed_as_its_source_and_an_unprobed_side_is_unmeasured():
    r = security_side.compare(ROWS, "poison_l3", "plain_l2")
    assert (r["probed_with"], r["probed_without"], r["better"]) == ("poison", "plain", 1)
    missing = security_side.compare(ROWS, "poison", "getrbyte")
    assert missing["unmeasured"].startswith("getrbyte not probed") and missing["cases"] == 0


def test_perls_own_malloc_is_unreachable_and_openbsds_side_is_given_alone():
    r = security_side.compare(ROWS, "perl-omalloc", "perl-mymalloc")
    assert r["unmeasured"].startswith("perl's own malloc is out of the C probes' reach")
    assert r["words"] == ("perl-omalloc alone: of 2 probe cases, 1 caught, 1 mitigated, 0 missed (perl's allocations "
                          "go to OpenBSD's malloc 1.299, probed as itself)")


def test_one_row_per_primary_cell():
    primary = pd.DataFrame([{"seed": "002", "configuration": "poison / plain"},
                            {"seed": "000", "configuration": "perl-omalloc / perl-mymalloc"}])
    table = security_side.debate_security(primary, ROWS)
    assert list(table.columns) == security_side.COLUMNS and list(table["seed"]) == ["002", "000"]


def test_seed_003s_pair_is_compared_as_its_second_port_with_the_reason_said_once():
    rows = [row("omalloc-1.128", "reuse-entropy-page", "", "mitigated", "1.0", "0.9", "1.1"),  # the first port
            row("omalloc-1.128-port2", "reuse-entropy-page", "", "mitigated", "4.9", "4.8", "5.0"),
            row("omalloc-1.128-getrbyte-port2", "reuse-entropy-page", "", "mitigated", "7.0", "6.9", "7.1"),
            row("omalloc-1.128-port2", "reuse-entropy", "", "mitigated", "4.8", "4.3", "5.5"),
            row("omalloc-1.128-getrbyte-port2", "reuse-entropy", "", "mitigated", "4.8", "4.4", "5.6"),
            row("omalloc-1.128-port2", "double-free", "16", "missed"),
            row("omalloc-1.128-getrbyte-port2", "double-free", "16", "missed")]
    r = security_side.compare(rows, "omalloc-1.128_l2", "omalloc-1.128-getrbyte")
    assert (r["probed_with"], r["probed_without"]) == ("omalloc-1.128-port2", "omalloc-1.128-getrbyte-port2")
    # the page cache's reuse moves (intervals apart), the chunk reuse does not, and never the first port's row
    assert "reuse-entropy-page 7.0 -> 4.9 bits" in r["words"] and "reuse-entropy 4.8 -> 4.8" not in r["words"]
    assert r["words"].count("second Linux port") == 1 and (r["cases"], r["same"]) == (1, 1)


def test_openbsds_page_placement_is_read_from_the_configuration_seed_003_was_probed_as():
    rows = [row("omalloc-1.128-port2", "placement-entropy-page", "", "missed", "0.0", "0.0", "0.0"),
            row("omalloc-1.128-getrbyte-port2", "placement-entropy-page", "", "missed", "0.0", "0.0", "0.0")]
    table = security_side.debate_security(pd.DataFrame([{"seed": "003", "configuration":
                                                         "omalloc-1.128 / omalloc-1.128-getrbyte"}]), rows)
    assert security_side.page_placement(rows, table) == {"allocator": "omalloc-1.128-port2", "bits": "0.0",
                                                         "low": "0.0", "high": "0.0"}
    assert security_side.page_placement(rows[1:], table) is None
