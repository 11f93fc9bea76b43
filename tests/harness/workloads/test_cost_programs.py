"""The cost check's programs: inputs with the same bytes every time, commands the campaign's parser accepts as
brought workloads (their input among the files it hashes), and names that keep them out of the speed tables."""
import pytest

from analysis.errors import HeapcostError
from analysis.harness.workloads import cost_programs
from analysis.harness.bench import alternation
from analysis.harness.workloads.brought import parse_extra_workloads
from analysis.publish.dataset.paper_runs import instrument_workloads


def test_the_generated_inputs_are_the_same_bytes_each_time(tmp_path):
    assert cost_programs.words_text() == cost_programs.words_text()
    assert cost_programs.json_text() == cost_programs.json_text()
    assert cost_programs.c_unit() == cost_programs.c_unit()
    # the words are the alternation bench's text: its A/A and the check run on one input
    assert cost_programs.words_text() == alternation.write_input(tmp_path / "w.txt").read_text()
    assert cost_programs.json_text().startswith("[\n{\"id\":0,") and cost_programs.json_text().endswith("}\n]\n")


def test_writing_the_inputs_twice_leaves_them_untouched(tmp_path):
    first = cost_programs.write_inputs(tmp_path)
    stamps = {k: p.stat().st_mtime_ns for k, p in first.items()}
    again = cost_programs.write_inputs(tmp_path)
    assert {k: p.stat().st_mtime_ns for k, p in again.items() if k != "cxx-unit"} == \
        {k: v for k, v in stamps.items() if k != "cxx-unit"}
    assert set(first) == {p.input for p in cost_programs.PROGRAMS if p.input}


def test_every_command_is_a_brought_workload_that_hashes_its_input(tmp_path):
    programs = [p for p in cost_programs.PROGRAMS if not cost_programs.missing_programs([p])]
    if len(programs) < len(cost_programs.PROGRAMS):
        pytest.skip(f"this host lacks {', '.join(cost_programs.missing_programs(cost_programs.PROGRAMS))}")
    inputs = cost_programs.write_inputs(tmp_path)
    parsed = {w.id: w for w in parse_extra_workloads(cost_programs.extra_workloads(programs, inputs))}
    assert list(parsed) == [p.name for p in programs]
    for p in programs:
        if p.input:
            assert str(inputs[p.input]) in {path for path, _ in parsed[p.name].files}, p.name


def test_unknown_programs_and_missing_packages_are_named():
    with pytest.raises(HeapcostError, match="no cost-check program nope"):
        cost_programs.chosen(["nope"])
    fake = cost_programs.Program("x", "/no/such/program {input}", "words", "some-package")
    assert cost_programs.missing_programs([fake]) == ["some-package"]
    with pytest.raises(HeapcostError, match="install some-package"):
        cost_programs.commands([fake], {"words": "w"})


def test_the_programs_are_instruments_not_speed_table_workloads():
    assert {p.name for p in cost_programs.PROGRAMS} <= instrument_workloads()


def test_the_second_set_is_other_programs_of_the_distribution(tmp_path):
    first = {p.name for p in cost_programs.PROGRAMS}
    second = {p.name for p in cost_programs.SECOND}
    assert len(second) >= 12 and not first & second
    # none runs an executable of the first set: other programs, not other inputs to the same ones
    def executable(p):
        return p.command.split()[0].rsplit("/", 1)[-1]
    assert not {executable(p) for p in cost_programs.PROGRAMS} & {executable(p) for p in cost_programs.SECOND}
    assert cost_programs.chosen(programs="second") == list(cost_programs.SECOND)
    assert cost_programs.chosen() == list(cost_programs.PROGRAMS)
    with pytest.raises(HeapcostError, match="no set of cost-check programs 'eighth'"):
        cost_programs.chosen(programs="eighth")
    assert {p.name for p in cost_programs.SECOND} <= instrument_workloads()


def test_the_third_set_is_other_programs_than_both_earlier_sets():
    def executable(p):
        return p.command.split()[0].rsplit("/", 1)[-1]

    earlier = cost_programs.PROGRAMS + cost_programs.SECOND
    third = cost_programs.THIRD
    assert len(third) >= 12 and not {p.name for p in earlier} & {p.name for p in third}
    assert not {executable(p) for p in earlier} & {executable(p) for p in third}
    assert cost_programs.chosen(programs="third") == list(third)
    assert {p.name for p in third} <= instrument_workloads()
    for make, small in ((cost_programs.xml_text, (20,)), (cost_programs.symbols_text, (20,)),
                        (cost_programs.roff_text, (20,)), (cost_programs.ninja_text, (20,)),
                        (cost_programs.gettext_c, (20,)), (cost_programs.gperf_text, (20,))):
        assert make(*small) == make(*small), make.__name__  # fixed seeds: the same bytes on any host
    assert cost_programs.gperf_text(5).startswith("%%\n") and cost_programs.gperf_text(5).endswith("\n%%\n")


def test_the_fourth_set_is_other_programs_than_every_earlier_set():
    import xml.etree.ElementTree as ET

    def executable(p):
        return p.command.split()[0].rsplit("/", 1)[-1]

    earlier = cost_programs.PROGRAMS + cost_programs.SECOND + cost_programs.THIRD
    fourth = cost_programs.FOURTH
    assert len(fourth) >= 12 and not {p.name for p in earlier} & {p.name for p in fourth}
    assert not {executable(p) for p in earlier} & {executable(p) for p in fourth}
    assert cost_programs.chosen(programs="fourth") == list(fourth)
    assert {p.name for p in fourth} <= instrument_workloads()
    # ctags sorts through `sort` unless told not to, and sort is a program of the first set
    assert "--sort=no" in cost_programs.BY_NAME["ctags-asm"].command
    for make, small in ((cost_programs.ruby_script, (20,)), (cost_programs.zsh_script, (20,)),
                        (cost_programs.xslt_self, (20,)), (cost_programs.nasm_text, (20,)),
                        (cost_programs.dot_text, (30, 60)), (cost_programs.eqn_text, (20,)),
                        (cost_programs.patterns_text, (50,))):
        assert make(*small) == make(*small), make.__name__  # fixed seeds: the same bytes on any host
    sheet = ET.fromstring(cost_programs.xslt_self(20).encode())  # well-formed, its records inside it
    assert len(sheet.findall(".//{urn:data}r")) == 20
    edges = [line.split(" -> ") for line in cost_programs.dot_text(30, 60).splitlines()[1:-1]]
    assert len(edges) == 60 and all(int(a.strip()[1:]) < int(b.strip(" ;")[1:]) for a, b in edges)  # acyclic
    words = cost_programs.patterns_text(50).split()
    assert words == sorted(set(words))


def test_the_fifth_set_is_other_programs_than_every_earlier_set():
    def executable(p):
        return p.command.split()[0].rsplit("/", 1)[-1]

    earlier = cost_programs.PROGRAMS + cost_programs.SECOND + cost_programs.THIRD + cost_programs.FOURTH
    fifth = cost_programs.FIFTH
    assert len(fifth) >= 12 and not {p.name for p in earlier} & {p.name for p in fifth}
    assert not {executable(p) for p in earlier} & {executable(p) for p in fifth}
    assert cost_programs.chosen(programs="fifth") == list(fifth)
    assert {p.name for p in fifth} <= instrument_workloads()
    # re2c and tcc replace the file they are told to write, /dev/null included: re2c writes to its standard output
    assert "-o" not in cost_programs.BY_NAME["re2c-lexer"].command.split()
    assert all(p.command.split()[p.command.split().index("-o") + 1] == "/dev/null"
               for p in fifth if "-o" in p.command.split())
    for make, small in ((cost_programs.ksh_script, (20,)), (cost_programs.yacc_text, (20,)),
                        (cost_programs.re2c_text, (20,)), (cost_programs.lp_text, (30, 10)),
                        (cost_programs.journal_text, (20,)), (cost_programs.tbl_text, (3, 4)),
                        (cost_programs.pic_text, (3,))):
        assert make(*small) == make(*small), make.__name__  # fixed seeds: the same bytes on any host
    assert cost_programs.lp_text(30, 10).count(" <= ") == 10 + 2 * 30  # the constraints, then both bounds of each
    assert cost_programs.tbl_text(3, 4).count(".TS") == 3 and cost_programs.pic_text(3).count(".PS") == 3


def test_a_set_writes_only_the_inputs_it_reads_the_same_bytes_each_time(tmp_path):
    cheap = [p for p in cost_programs.SECOND if p.input in ("bc-script", "tcl-script")]
    written = cost_programs.write_inputs(tmp_path, cheap)
    assert set(written) == {"bc-script", "tcl-script"} and written["bc-script"].read_text() == cost_programs.bc_script()
    for make, small in ((cost_programs.pairs_text, (50, 200)), (cost_programs.asm_text, (20,)),
                        (cost_programs.po_text, (20,)), (cost_programs.lex_text, (20,)),
                        (cost_programs.makefile_text, (20,)), (cost_programs.m4_text, (20,))):
        assert make(*small) == make(*small), make.__name__  # fixed seeds: the same bytes on any host
    assert cost_programs.m4_text(20).endswith(cost_programs.words_text())
    import graphlib

    edges = [e.split() for e in cost_programs.pairs_text(50, 200).splitlines()]
    assert len(edges) == 200 and all(len(e) == 2 for e in edges)
    graph = {}
    for a, b in edges:
        graph.setdefault(b, set()).add(a)
    list(graphlib.TopologicalSorter(graph).static_order())  # tsort's input has no cycle (raises CycleError if it had)


def test_the_sixth_set_is_other_programs_than_every_earlier_set():
    def executable(p):
        return p.command.split()[0].rsplit("/", 1)[-1]

    earlier = (cost_programs.PROGRAMS + cost_programs.SECOND + cost_programs.THIRD + cost_programs.FOURTH
               + cost_programs.FIFTH)
    sixth = cost_programs.SIXTH
    assert len(sixth) >= 12 and not {p.name for p in earlier} & {p.name for p in sixth}
    assert not {executable(p) for p in earlier} & {executable(p) for p in sixth}
    assert not {p.package for p in earlier} & {p.package for p in sixth}  # nor another program of their packages
    assert cost_programs.chosen(programs="sixth") == list(sixth)
    assert {p.name for p in sixth} <= instrument_workloads()
    assert not any("-o" in p.command.split() for p in sixth)  # every one writes to its standard output
    for make, small in ((cost_programs.markdown_text, (6,)), (cost_programs.scss_text, (5,)),
                        (cost_programs.html_text, (5,)), (cost_programs.rec_text, (5,)), (cost_programs.man_text, (4,))):
        assert make(*small) == make(*small), make.__name__  # fixed seeds: the same bytes on any host
    import xml.etree.ElementTree as ET

    page = ET.fromstring(cost_programs.html_text(5).encode())  # the page is well-formed: five rows, five paragraphs
    assert len(page.findall(".//tr")) == 5 and len(page.findall(".//p")) == 5
    assert cost_programs.rec_text(5).count("\nSize: ") == 5 and cost_programs.man_text(4).count("\n.SH ") == 5


def test_the_seventh_set_is_other_programs_than_every_earlier_set():
    import shlex

    def executable(p):
        return p.command.split()[0].rsplit("/", 1)[-1]

    earlier = (cost_programs.PROGRAMS + cost_programs.SECOND + cost_programs.THIRD + cost_programs.FOURTH
               + cost_programs.FIFTH + cost_programs.SIXTH)
    seventh = cost_programs.SEVENTH
    assert len(seventh) >= 12 and not {p.name for p in earlier} & {p.name for p in seventh}
    assert not {executable(p) for p in earlier} & {executable(p) for p in seventh}
    assert not {p.package for p in earlier} & {p.package for p in seventh}
    assert cost_programs.chosen(programs="seventh") == list(seventh)
    assert {p.name for p in seventh} <= instrument_workloads()
    for p in seventh:  # an output named on the command line is the standard output or nothing
        words = shlex.split(p.command)
        assert all(words[i + 1] in ("-", "/dev/null", "STDOUT") for i, w in enumerate(words) if w in ("-o",)), p.name
    for make, small in ((cost_programs.calc_script, (5,)), (cost_programs.rtf_text, (4,))):
        assert make(*small) == make(*small), make.__name__
    rtf = cost_programs.rtf_text(4)
    assert rtf.startswith("{\\rtf1") and rtf.count("{") == rtf.count("}")  # balanced groups: one document
