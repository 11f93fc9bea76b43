"""docs/paper-map.md is derived from paper/paper.typ: every generated file the paper reads, the sections that
read it, and the notebook whose name it starts with."""
from analysis.publish.render import paper_map
from analysis.publish.render.paper import NOTEBOOKS

SOURCE = """#let P = json("generated/paper_numbers.json")
#let R = J("results_numbers.json")
= Method
== Statistics <sec-stats>
#fig("noise_coverage.svg", [coverage])
#C("results_speed.csv") and again #C("results_speed.csv")
= The debates, answered
#C("results_speed.csv") #C("stray_table.csv")
"""


def test_the_map_lists_each_file_with_the_sections_that_read_it_and_its_writer():
    found = paper_map.reads(SOURCE)
    assert found == {"paper_numbers.json": {"kind": "numbers", "sections": []},
                     "results_numbers.json": {"kind": "numbers", "sections": []},
                     "noise_coverage.svg": {"kind": "figure", "sections": ["Statistics"]},
                     "results_speed.csv": {"kind": "table", "sections": ["Statistics", "The debates, answered"]},
                     "stray_table.csv": {"kind": "table", "sections": ["The debates, answered"]}}
    text = paper_map.page(SOURCE, NOTEBOOKS)
    assert "| `results_speed.csv` | table | Statistics; The debates, answered | notebooks/results.ipynb |" in text
    assert "| `noise_coverage.svg` | figure | Statistics | notebooks/noise.ipynb |" in text
    assert "| `stray_table.csv` | table | The debates, answered | nothing: no notebook's name starts its name |" in text


def test_the_published_map_is_the_one_the_paper_source_gives():
    expected = paper_map.page(paper_map.sources(), NOTEBOOKS)
    assert paper_map.PAPER_MAP.read_text() == expected, "docs/paper-map.md is stale: run `make paper`"
    assert "nothing: no notebook" not in expected  # every file the paper reads has a writer
    assert expected.count("\n| `") > 40
