"""How the main text lists one host's answer in a cell where hosts disagree: an interval on a single degree of
freedom left by builds that differ is named, not printed; any other interval is printed as computed."""
from types import SimpleNamespace

from analysis.publish.debates.writer import _host_display


def host(df, builds, display="12.335 [0.582, 261.264]"):
    return SimpleNamespace(df=df, n_builds=builds, n_runs=4, ratio=12.33537, display=display)


def test_two_builds_that_differ_leave_one_degree_of_freedom_and_no_printed_interval():
    shown = _host_display(host(1.0, 2))
    assert shown == "12.335 from 2 builds that differ over 4 runs, its interval on 1 degree of freedom not shown"


def test_an_interval_with_more_degrees_of_freedom_or_from_one_build_is_printed():
    assert _host_display(host(3.0, 2, "1.102 [1.096, 1.107]")) == "1.102 [1.096, 1.107]"
    assert _host_display(host(1.0, 1, "17.896 [11.858, 27.010]")) == "17.896 [11.858, 27.010]"
    assert _host_display(host(float("nan"), 2, "n/a")) == "n/a"
