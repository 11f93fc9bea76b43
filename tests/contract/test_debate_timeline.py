"""The timeline of the debates' registrations and amendments: each event once, the earliest first."""
from analysis.contract import debates_spec


def test_one_amendment_to_several_debates_is_one_row_and_the_registration_comes_first():
    qs = debates_spec.load()
    rows = debates_spec.timeline(qs)
    assert [list(r) for r in rows][0] == debates_spec.TIMELINE_COLUMNS
    assert rows[0]["event"] == "registered" and rows[0]["seeds"] == ", ".join(sorted(qs))
    assert [r["date"] for r in rows] == sorted(r["date"] for r in rows)
    keys = [(r["date"], r["commit"], r["what"]) for r in rows]
    assert len(keys) == len(set(keys))
    # every amendment of every debate is in exactly one row that names its seed
    for seed, q in qs.items():
        for a in q.amendments:
            dated, what = a.split(": ", 1)
            hits = [r for r in rows if r["what"] == what and dated.endswith(r["commit"])]
            assert len(hits) == 1 and seed in hits[0]["seeds"].split(", ")
