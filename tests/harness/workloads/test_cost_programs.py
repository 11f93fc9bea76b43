"""The cost check's programs: inputs with the same bytes every time, commands the campaign's parser accepts as
brought workloads (their input among the files it hashes), and names that keep them out of the speed tables."""
import pytest

from analysis.errors import HeapcostError
from analysis.harness.workloads import cost_inputs, cost_programs
from analysis.harness.bench import alternation
from analysis.harness.workloads.brought import parse_extra_workloads
from analysis.publish.dataset.paper_runs import instrument_workloads


def test_the_generated_inputs_are_the_same_bytes_each_time(tmp_path):
    assert cost_inputs.words_text() == cost_inputs.words_text()
    assert cost_inputs.json_text() == cost_inputs.json_text()
    assert cost_inputs.c_unit() == cost_inputs.c_unit()
    # the words are the alternation bench's text: its A/A and the check run on one input
    assert cost_inputs.words_text() == alternation.write_input(tmp_path / "w.txt").read_text()
    assert cost_inputs.json_text().startswith("[\n{\"id\":0,") and cost_inputs.json_text().endswith("}\n]\n")


def test_writing_the_inputs_twice_leaves_them_untouched(tmp_path):
    first = cost_inputs.write_inputs(tmp_path)
    stamps = {k: p.stat().st_mtime_ns for k, p in first.items()}
    again = cost_inputs.write_inputs(tmp_path)
    assert {k: p.stat().st_mtime_ns for k, p in again.items() if k != "cxx-unit"} == \
        {k: v for k, v in stamps.items() if k != "cxx-unit"}
    assert set(first) == {p.input for p in cost_programs.PROGRAMS if p.input}


def test_every_command_is_a_brought_workload_that_hashes_its_input(tmp_path):
    programs = [p for p in cost_programs.PROGRAMS if not cost_programs.missing_programs([p])]
    if len(programs) < len(cost_programs.PROGRAMS):
        pytest.skip(f"this host lacks {', '.join(cost_programs.missing_programs(cost_programs.PROGRAMS))}")
    inputs = cost_inputs.write_inputs(tmp_path)
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
    with pytest.raises(HeapcostError, match="no set of cost-check programs 'eleventh'"):
        cost_programs.chosen(programs="eleventh")
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
    for make, small in ((cost_inputs.xml_text, (20,)), (cost_inputs.symbols_text, (20,)),
                        (cost_inputs.roff_text, (20,)), (cost_inputs.ninja_text, (20,)),
                        (cost_inputs.gettext_c, (20,)), (cost_inputs.gperf_text, (20,))):
        assert make(*small) == make(*small), make.__name__  # fixed seeds: the same bytes on any host
    assert cost_inputs.gperf_text(5).startswith("%%\n") and cost_inputs.gperf_text(5).endswith("\n%%\n")


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
    for make, small in ((cost_inputs.ruby_script, (20,)), (cost_inputs.zsh_script, (20,)),
                        (cost_inputs.xslt_self, (20,)), (cost_inputs.nasm_text, (20,)),
                        (cost_inputs.dot_text, (30, 60)), (cost_inputs.eqn_text, (20,)),
                        (cost_inputs.patterns_text, (50,))):
        assert make(*small) == make(*small), make.__name__  # fixed seeds: the same bytes on any host
    sheet = ET.fromstring(cost_inputs.xslt_self(20).encode())  # well-formed, its records inside it
    assert len(sheet.findall(".//{urn:data}r")) == 20
    edges = [line.split(" -> ") for line in cost_inputs.dot_text(30, 60).splitlines()[1:-1]]
    assert len(edges) == 60 and all(int(a.strip()[1:]) < int(b.strip(" ;")[1:]) for a, b in edges)  # acyclic
    words = cost_inputs.patterns_text(50).split()
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
    for make, small in ((cost_inputs.ksh_script, (20,)), (cost_inputs.yacc_text, (20,)),
                        (cost_inputs.re2c_text, (20,)), (cost_inputs.lp_text, (30, 10)),
                        (cost_inputs.journal_text, (20,)), (cost_inputs.tbl_text, (3, 4)),
                        (cost_inputs.pic_text, (3,))):
        assert make(*small) == make(*small), make.__name__  # fixed seeds: the same bytes on any host
    assert cost_inputs.lp_text(30, 10).count(" <= ") == 10 + 2 * 30  # the constraints, then both bounds of each
    assert cost_inputs.tbl_text(3, 4).count(".TS") == 3 and cost_inputs.pic_text(3).count(".PS") == 3


def test_a_set_writes_only_the_inputs_it_reads_the_same_bytes_each_time(tmp_path):
    cheap = [p for p in cost_programs.SECOND if p.input in ("bc-script", "tcl-script")]
    written = cost_inputs.write_inputs(tmp_path, cheap)
    assert set(written) == {"bc-script", "tcl-script"} and written["bc-script"].read_text() == cost_inputs.bc_script()
    for make, small in ((cost_inputs.pairs_text, (50, 200)), (cost_inputs.asm_text, (20,)),
                        (cost_inputs.po_text, (20,)), (cost_inputs.lex_text, (20,)),
                        (cost_inputs.makefile_text, (20,)), (cost_inputs.m4_text, (20,))):
        assert make(*small) == make(*small), make.__name__  # fixed seeds: the same bytes on any host
    assert cost_inputs.m4_text(20).endswith(cost_inputs.words_text())
    import graphlib

    edges = [e.split() for e in cost_inputs.pairs_text(50, 200).splitlines()]
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
    for make, small in ((cost_inputs.markdown_text, (6,)), (cost_inputs.scss_text, (5,)),
                        (cost_inputs.html_text, (5,)), (cost_inputs.rec_text, (5,)), (cost_inputs.man_text, (4,))):
        assert make(*small) == make(*small), make.__name__  # fixed seeds: the same bytes on any host
    import xml.etree.ElementTree as ET

    page = ET.fromstring(cost_inputs.html_text(5).encode())  # the page is well-formed: five rows, five paragraphs
    assert len(page.findall(".//tr")) == 5 and len(page.findall(".//p")) == 5
    assert cost_inputs.rec_text(5).count("\nSize: ") == 5 and cost_inputs.man_text(4).count("\n.SH ") == 5


def later_set_is_other_programs(name: str) -> None:
    """A later set: at least twelve programs, none of an earlier set by name, executable or package, each chosen by
    its set's name, each a workload the speed tables leave out, none naming an output file but the standard
    output."""
    import shlex

    def executable(p):
        return p.command.split()[0].rsplit("/", 1)[-1]

    names = list(cost_programs.SETS)
    later = cost_programs.SETS[name]
    earlier = [p for s in names[:names.index(name)] for p in cost_programs.SETS[s]]
    assert len(later) >= 12 and not {p.name for p in earlier} & {p.name for p in later}
    assert not {executable(p) for p in earlier} & {executable(p) for p in later}
    assert not {p.package for p in earlier} & {p.package for p in later}
    assert cost_programs.chosen(programs=name) == list(later)
    assert {p.name for p in later} <= instrument_workloads()
    for p in later:  # an output named on the command line is the standard output or nothing
        words = shlex.split(p.command)
        assert all(words[i + 1] in ("-", "/dev/null", "/dev/stdout", "STDOUT") for i, w in enumerate(words) if w in ("-o",)), p.name


def test_the_seventh_set_is_other_programs_than_every_earlier_set():
    later_set_is_other_programs("seventh")
    for make, small in ((cost_inputs.calc_script, (5,)), (cost_inputs.rtf_text, (4,))):
        assert make(*small) == make(*small), make.__name__
    rtf = cost_inputs.rtf_text(4)
    assert rtf.startswith("{\\rtf1") and rtf.count("{") == rtf.count("}")  # balanced groups: one document


def test_the_eighth_set_is_other_programs_than_every_earlier_set():
    later_set_is_other_programs("eighth")
    # the new inputs: the same bytes each time, and the shapes their programs read
    for make, small in ((cost_inputs.turtle_text, (3,)), (cost_inputs.pbm_image, (50, 4)),
                        (cost_inputs.mksh_script, (5,)), (cost_inputs.yash_script, (5,)),
                        (cost_inputs.gnuplot_script, (5,)), (cost_inputs.smt_lia, (4,))):
        assert make(*small) == make(*small), make.__name__
    assert cost_inputs.turtle_text(3).count(" a ex:Thing ;") == 3
    pbm = cost_inputs.pbm_image(50, 4).split("\n")
    assert pbm[:2] == ["P1", "50 50"] and len(pbm[2:-1]) == 50 and all(len(r.split()) == 50 for r in pbm[2:-1])
    smt = cost_inputs.smt_lia(4)
    assert smt.count("(declare-const") == 4 and smt.count("(assert") == 4 * 4 and smt.count("(") == smt.count(")")


def test_the_ninth_set_is_other_programs_than_every_earlier_set():
    import re

    later_set_is_other_programs("ninth")
    for make, small in ((cost_inputs.js_script, (5,)), (cost_inputs.csh_script, (5,)), (cost_inputs.bib_text, (3,)),
                        (cost_inputs.lp_solve_text, (14, 2)), (cost_inputs.remind_text, (3,)),
                        (cost_inputs.pdf_document, (2, 3))):
        assert make(*small) == make(*small), make.__name__
    assert cost_inputs.bib_text(3).count("@article{") == 3 and cost_inputs.remind_text(3).count("\nREM ") == 2
    assert cost_inputs.lp_solve_text(14, 2).count("\nc") == 2
    # the PDF's cross-reference table gives each object's true offset, and its pages are counted
    pdf = cost_inputs.pdf_document(2, 3)
    table = pdf[pdf.index("xref\n"):].split("\n")[3:]
    offsets = [int(line.split()[0]) for line in table if line.endswith(" n ")]
    assert [int(pdf[o:].split(" ", 1)[0]) for o in offsets] == list(range(1, len(offsets) + 1))
    assert int(pdf.rsplit("startxref\n", 1)[1].split()[0]) == pdf.index("xref\n")
    assert re.search(r"/Count 2 >>", pdf) and pdf.count("/Type /Page ") == 2


def test_the_tenth_set_is_other_programs_than_every_earlier_set():
    later_set_is_other_programs("tenth")
    for make, small in ((cost_inputs.slang_script, (5,)), (cost_inputs.rexx_script, (5,)),
                        (cost_inputs.zone_text, (6,)), (cost_inputs.points_text, (4,))):
        assert make(*small) == make(*small), make.__name__
    zone = cost_inputs.zone_text(6).splitlines()
    assert sum(" IN A " in line for line in zone) == 6 + 1  # each name's address and the name server's
    assert sum(" IN TXT " in line for line in zone) == 2 and sum(" IN MX " in line for line in zone) == 2
    assert [len(line.split()) for line in cost_inputs.points_text(4).splitlines()] == [2] * 4
    assert "for (i = 0; i < 5; i++)" in cost_inputs.slang_script(5) and "do i = 1 to 5" in cost_inputs.rexx_script(5)
