"""The programs the cost model (stats/cost_model.py) is checked on: programs nobody wrote for heapcost, from the
distribution, run as a user would bring them (EXTRA_WORKLOADS), on inputs cost_inputs.py writes.

Each program's allocation profile is taken and its cost under each configuration predicted and registered
before it is measured (publish/results/cost_check.py); the measurement is a campaign of these programs against
the baseline, in turns from outside where the program allows it (harness/timing/alternation.py).
"""
import shutil
from dataclasses import dataclass
from pathlib import Path

from analysis.errors import HeapcostError

CC1_DIR = Path("/usr/lib/gcc/x86_64-linux-gnu/12")


@dataclass(frozen=True)
class Program:
    name: str
    command: str            # {input} is the program's input file (inputs named below)
    input: str = ""         # which input: words, json, c-unit, cxx-unit
    package: str = ""       # the Debian package that ships the program
    what: str = ""


# the first registration's programs (registered 2026-12-01 and 2026-12-03); kept as they were
PROGRAMS = (
    Program("perl-words", "perl -ne '$w{$_}++ for split; END { print scalar(keys %w), qq(\\n) }' {input}", "words",
            "perl", "perl counting the words of a text in a hash"),
    Program("perl-json", "perl -MJSON::PP -e 'open my $f, q(<), $ARGV[0] or die; my $j = JSON::PP->new->canonical; "
            "my $d = $j->decode(do { local $/; <$f> }); print length($j->encode($d)), qq(\\n)' {input}", "json", "perl",
            "perl's own JSON module decoding and encoding a document"),
    Program("python-objects", "/usr/bin/python3 -S -c 'import sys; d = {}; [d.setdefault(w, []).append(i) for i, w in "
            "enumerate(open(sys.argv[1]).read().split())]; print(len(d), sum(map(len, d.values())))' {input}",
            "words", "python3", "python building a dict of lists from a text's words"),
    Program("sqlite-group", "sqlite3 :memory: 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE "
            "x<150000) SELECT count(DISTINCT x % 977), sum(length(printf(\"%x\", x))) FROM c;'", "", "sqlite3",
            "sqlite grouping a generated series in memory"),
    Program("sqlite-index", "sqlite3 :memory: 'CREATE TABLE t(k TEXT, v INTEGER); WITH RECURSIVE c(x) AS (SELECT 1 "
            "UNION ALL SELECT x+1 FROM c WHERE x<150000) INSERT INTO t SELECT printf(\"key%07d\", (x * 7919) % 150000), "
            "x FROM c; CREATE INDEX i ON t(k); SELECT count(*), max(k) FROM t WHERE k >= \"key0075000\";'", "", "sqlite3",
            "sqlite filling a table and building an index in memory"),
    Program("gawk-count", "gawk '{ for (i = 1; i <= NF; i++) n[$i]++ } END { for (w in n) k++; print k }' {input}",
            "words", "gawk", "gawk counting words in an associative array"),
    Program("jq-group", "jq -c 'group_by(.tag) | map({tag: .[0].tag, n: length, s: (map(.v) | add)})' {input}",
            "json", "jq", "jq grouping the records of a JSON document"),
    Program("gzip-text", "gzip -6 -c {input}", "words", "gzip", "gzip compressing a text (few allocations)"),
    Program("sort-text", "sort {input}", "words", "coreutils", "GNU sort ordering the lines of a text"),
    Program("xz-json", "xz -6 -c -T1 {input}", "json", "xz-utils",
            "xz compressing a JSON document (a few large blocks, allocated once, barely touched)"),
    Program("cc1-c", f"{CC1_DIR}/cc1 -quiet -O2 {{input}} -o /dev/null", "c-unit", "gcc-12",
            "GCC's C compiler proper at -O2 on a generated unit"),
    Program("cc1plus-cxx", f"{CC1_DIR}/cc1plus -fpreprocessed -quiet -O1 {{input}} -o /dev/null", "cxx-unit",
            "g++-12", "GCC's C++ compiler proper at -O1 on a unit using the standard containers"),
)
# the second registration's programs, fixed before the model's terms changed after the first check and measured
# only after their predictions were committed: other programs of the distribution, none of the first set's
SECOND = (
    Program("mawk-pairs", "mawk '{ for (i = 1; i < NF; i++) p[$i \" \" $(i + 1)]++ } END { for (w in p) k++; print k }' "
            "{input}", "words", "mawk", "mawk counting the word pairs of a text in an associative array"),
    Program("sed-swap", "sed -E 's/([a-z]+) ([a-z]+)/\\2 \\1/g' {input}", "words", "sed",
            "GNU sed swapping each pair of words by a regular expression"),
    Program("tsort-graph", "tsort {input}", "pairs", "coreutils", "GNU tsort ordering a graph of 30,000 nodes"),
    Program("ptx-index", "ptx {input}", "words", "coreutils", "GNU ptx writing a permuted index of a text"),
    Program("bc-digits", "bc -l {input}", "bc-script", "bc", "bc computing constants to 900 digits"),
    Program("bzip2-text", "bzip2 -9 -c {input}", "words", "bzip2", "bzip2 compressing a text (few allocations)"),
    Program("zstd-json", "zstd -19 -T1 -q -c {input}", "json", "zstd",
            "zstd compressing a JSON document at level 19 on one thread"),
    Program("clang-cxx", "clang-14 -w -O1 -c -x c++-cpp-output -std=gnu++17 {input} -o /dev/null", "cxx-unit-clang",
            "clang-14", "clang compiling a C++ unit over the standard containers at -O1"),
    Program("as-asm", "as -o /dev/null {input}", "asm", "binutils", "GNU as assembling a generated file"),
    Program("msgfmt-po", "msgfmt -o /dev/null {input}", "po", "gettext", "msgfmt compiling a catalogue of messages"),
    Program("flex-scanner", "flex -t {input}", "lex", "flex", "flex building a scanner of 2,500 rules"),
    Program("tcl-dict", "tclsh8.6 {input}", "tcl-script", "tcl8.6", "Tcl building a dict of lists and a list of strings"),
    Program("make-dryrun", "make -n -f {input} all", "makefile", "make",
            "GNU make reading 10,000 rules and printing what it would run"),
    Program("m4-macros", "m4 {input}", "m4-text", "m4", "m4 expanding 800 macros through a text"),
)
# the third registration's programs, fixed before the premium (stats/cost_terms.py) was registered with them and
# measured only after their predictions were committed: other programs of the distribution, none of the earlier
# sets'
THIRD = (
    Program("lua-tables", "lua5.4 {input}", "lua-script", "lua5.4", "Lua building a table of lists and a list of strings"),
    Program("xmllint-format", "xmllint --format {input}", "xml", "libxml2-utils",
            "xmllint parsing an XML document of 60,000 records and writing it indented"),
    Program("dc-arith", "dc {input}", "dc-script", "dc", "dc on numbers of thousands of digits"),
    Program("gperf-keywords", "gperf {input}", "gperf-keywords", "gperf", "gperf finding a perfect hash of 1,500 keywords"),
    Program("cxxfilt-symbols", "c++filt @{input}", "symbols", "binutils", "c++filt demangling 150,000 C++ symbols"),
    Program("troff-text", "troff -Tutf8 {input}", "roff", "groff-base", "GNU troff formatting a long text with macros"),
    Program("cmake-lists", "cmake -P {input}", "cmake-script", "cmake", "a CMake script building, sorting and "
            "de-duplicating a list"),
    Program("ninja-dryrun", "ninja -n -f {input}", "ninja", "ninja-build",
            "ninja reading 15,000 build edges and printing what it would run"),
    Program("xgettext-c", "xgettext -o /dev/null -k_ {input}", "gettext-c", "gettext",
            "xgettext extracting 30,000 messages from a C file"),
    Program("lz4-text", "lz4 -9 -c {input}", "words", "lz4", "lz4 compressing a text (few allocations)"),
    Program("bash-assoc", "bash {input}", "bash-script", "bash", "bash counting keys in an associative array"),
    Program("objdump-disasm", "objdump -d -r {input}", "object", "binutils", "objdump disassembling an object of "
            "12,000 functions"),
    Program("nm-sorted", "nm -n {input}", "object", "binutils", "nm listing an object's symbols by address"),
)
# the fourth registration's programs, fixed before the model charged a growing realloc done in place as no fresh
# block (stats/cost_model.fresh_calls) was registered with them and measured only after their predictions were
# committed: other programs of the distribution, none of the earlier sets' nor starting one of their executables
FOURTH = (
    Program("ruby-hash", "ruby {input}", "ruby-script", "ruby", "Ruby building a hash of arrays and a list of strings"),
    Program("zsh-assoc", "zsh {input}", "zsh-script", "zsh", "zsh counting keys in an associative array"),
    Program("xsltproc-group", "xsltproc {input} {input}", "xslt-self", "xsltproc",
            "xsltproc grouping and summing 20,000 records held in its own stylesheet"),
    Program("nasm-asm", "nasm -f elf64 -o /dev/null {input}", "nasm-asm", "nasm",
            "NASM assembling a generated file of 6,000 functions through a macro"),
    Program("busybox-awk", "busybox awk '{ for (i = 1; i <= NF; i++) n[$i]++ } END { for (w in n) k++; print k }' "
            "{input}", "words", "busybox", "BusyBox's awk counting words in an associative array"),
    Program("msgcat-sort", "msgcat --sort-output -o /dev/null {input}", "po", "gettext",
            "msgcat reading a catalogue of messages and writing it sorted"),
    Program("msgmerge-po", "msgmerge -q -o /dev/null {input} {input}", "po", "gettext",
            "msgmerge merging a catalogue of messages with itself"),
    Program("ctags-asm", "ctags --sort=no -f - {input}", "asm", "universal-ctags",
            "Universal Ctags listing the tags of a generated assembler file"),
    Program("tidy-xml", "tidy -q -xml -indent {input}", "xslt-self", "tidy",
            "HTML Tidy reading an XML document and writing it indented"),
    Program("dot-graph", "dot -Tsvg -o /dev/null {input}", "dot-graph", "graphviz",
            "Graphviz's dot laying out a directed graph of 700 nodes and 1,400 edges"),
    Program("eqn-math", "eqn -Tutf8 {input}", "eqn-text", "groff-base", "GNU eqn translating 4,000 equations for troff"),
    Program("grep-fixed", "grep -c -F -f {input} {input}", "patterns", "grep",
            "GNU grep searching a list of words for every word of it as a fixed string (few allocations)"),
)
# the fifth registration's programs, fixed before a class held few blocks at a time took the held cells
# (stats/cost_model.weights) was registered with them and measured only after their predictions were committed:
# other programs of the distribution, none of the earlier sets' nor starting one of their executables; none writes
# an output file named on its command line (re2c and tcc replace such a file, /dev/null included)
FIFTH = (
    Program("ksh-assoc", "ksh93 {input}", "ksh-script", "ksh", "ksh93 counting keys in an associative array"),
    Program("byacc-grammar", "byacc -o /dev/null {input}", "yacc-grammar", "byacc",
            "Berkeley yacc building the parser of a grammar of 1,500 rules"),
    Program("re2c-lexer", "re2c {input}", "re2c-lexer", "re2c", "re2c compiling a lexer of 2,000 keywords"),
    Program("glpsol-lp", "glpsol --lp {input}", "lp-model", "glpk-utils",
            "GLPK's simplex solving a linear programme of 1,200 variables and 800 constraints"),
    Program("ledger-balance", "ledger -f {input} balance", "ledger-journal", "ledger",
            "ledger reading a journal of 20,000 transactions and printing the balances"),
    Program("tbl-tables", "tbl {input}", "tbl-text", "groff-base", "GNU tbl translating 300 tables for troff"),
    Program("pic-pictures", "pic {input}", "pic-text", "groff-base", "GNU pic translating 400 pictures for troff"),
    Program("hunspell-list", "hunspell -d en_US -l {input}", "patterns", "hunspell",
            "Hunspell listing the words of a list its English dictionary does not know (hunspell-en-us)"),
    Program("yasm-asm", "yasm -f elf64 -o /dev/null {input}", "nasm-asm", "yasm",
            "Yasm assembling the NASM file of the fourth set"),
    Program("xmlstarlet-count", "xmlstarlet sel -t -v count(//r) {input}", "xml", "xmlstarlet",
            "XMLStarlet counting the records of an XML document of 60,000 records"),
    Program("enscript-text", "enscript -q -o /dev/null {input}", "words", "enscript",
            "GNU Enscript setting a text in PostScript"),
    Program("indent-c", "indent -st {input}", "gettext-c", "indent",
            "GNU indent reformatting a C file of 30,000 lines (few allocations)"),
)
# the sixth registration's programs, fixed before the held term (stats/cost_terms.py: a cost per MiB of small blocks
# held) was registered with them and measured only after their predictions were committed: other programs of the
# distribution, none of the earlier sets' nor built on one of their libraries' parsers (expat's xmlwf, not
# libxml2's), none writing an output file named on its command line, each ending with status 0 on its input
SIXTH = (
    Program("cppcheck-c", "cppcheck -q {input}", "c-large", "cppcheck",
            "Cppcheck analysing a C file of 400 functions of loops and switches"),
    Program("jshon-json", "jshon -F {input} -l", "json-large", "jshon",
            "jshon (jansson) reading a JSON array of 40,000 records and printing its length"),
    Program("cmark-md", "cmark {input}", "markdown", "cmark",
            "cmark rendering a CommonMark document of 6,000 sections as HTML"),
    Program("discount-md", "markdown {input}", "markdown", "discount",
            "Discount rendering the same Markdown document as HTML"),
    Program("sassc-scss", "sassc {input}", "scss", "sassc", "libsass compiling a stylesheet of 3,000 nested rules"),
    Program("html2text-html", "html2text {input}", "html", "html2text",
            "html2text rendering an HTML page of 4,000 table rows and paragraphs as text"),
    Program("lynx-html", "lynx -dump -nolist -force_html {input}", "html", "lynx",
            "Lynx rendering the same HTML page as text"),
    Program("xmlwf-xml", "xmlwf {input}", "xml", "expat",
            "expat's xmlwf checking an XML document of 60,000 records is well formed"),
    Program("column-pairs", "column -t {input}", "pairs", "bsdextrautils",
            "column laying out 200,000 lines of word pairs as a table"),
    Program("recsel-rec", "recsel -e Size>500 -p Name,Size {input}", "rec", "recutils",
            "GNU recutils selecting from a database of 20,000 records"),
    Program("uncrustify-c", "uncrustify -q -c /dev/null -f {input}", "c-large", "uncrustify",
            "Uncrustify reformatting the same C file with its default configuration"),
    Program("mandoc-man", "mandoc -Tutf8 {input}", "man-page", "mandoc",
            "mandoc formatting a manual page of 1,500 sections"),
)
# the seventh registration's programs, fixed before the placement terms (stats/cost_terms.py: each configuration's
# part of what laying a program's blocks side by side gains and scattering them costs) were registered with them
# and measured only after their predictions were committed: again none of the earlier sets' programs nor built on
# one of their libraries' parsers (so no clang-format, which is clang's), none writing an output file named on its
# command line, each ending with status 0 on its input
SEVENTH = (
    Program("astyle-c", "astyle --stdin={input}", "gettext-c", "astyle",
            "Artistic Style reformatting a C file of 30,000 lines to its standard output"),
    Program("srchilite-c", "source-highlight -s c -i {input} -o STDOUT", "c-large", "source-highlight",
            "GNU Source-highlight rendering a C file of 400 functions as HTML"),
    Program("highlight-c", "highlight -O ansi {input}", "c-large", "highlight",
            "highlight (its Lua language definitions) colouring the same C file for a terminal"),
    Program("bison-grammar", "bison -o /dev/null {input}", "yacc-grammar", "bison",
            "GNU Bison building the LALR tables of a grammar of 1,500 rules"),
    Program("a2ps-text", "a2ps -q -o - {input}", "words", "a2ps", "a2ps typesetting a text of 60,000 lines as PostScript"),
    Program("nawk-count", "original-awk '{ for (i = 1; i <= NF; i++) n[$i]++ } END { for (w in n) k++; print k }' "
            "{input}", "words", "original-awk", "the one true awk counting words in an associative array"),
    Program("jimsh-dict", "jimsh {input}", "tcl-script", "jimsh", "Jim Tcl running a script of dicts and strings"),
    Program("lowdown-md", "lowdown {input}", "markdown", "lowdown", "lowdown rendering a Markdown document as HTML"),
    Program("hxnormalize-html", "hxnormalize -x {input}", "html", "html-xml-utils",
            "html-xml-utils parsing an HTML page and writing it back as XML"),
    Program("links2-html", "links2 -dump {input}", "html", "links2", "Links rendering the same HTML page as text"),
    Program("calc-script", "calc -q -f {input}", "calc-script", "apcalc",
            "calc summing the first 3,000 factorials modulo a prime in arbitrary precision"),
    Program("unrtf-rtf", "unrtf --html {input}", "rtf", "unrtf", "UnRTF converting an RTF document of 6,000 paragraphs to HTML"),
)
# the eighth registration's programs, fixed after the cells of one size (stats/cost_model.py: a class's pairs taken
# by the size just freed) and profiles pooled per kind were chosen, registered with them and measured only after
# their predictions were committed: none of the earlier sets' programs nor built on one of their libraries'
# parsers, none writing an output file, each ending with status 0 on its input, each run taking 0.1-1 s here
# (Rust's bat and the C++ of cbc and z3 among them, which call the system's malloc as C does)
EIGHTH = (
    Program("bat-c", "batcat --color=always --paging=never --style=plain -l c {input}", "c-large", "bat",
            "bat (syntect's grammars) colouring the C file of 400 functions for a terminal"),
    Program("elinks-html", "elinks -no-home -dump {input}", "html", "elinks",
            "ELinks rendering the HTML page of 4,000 rows as text"),
    Program("cbc-lp", "cbc {input} solve", "lp-model", "coinor-cbc",
            "COIN-OR CBC (its Clp) solving the linear programme of 1,200 variables"),
    Program("agrep-words", "tre-agrep -c -1 abcde {input}", "words", "tre-agrep",
            "TRE's agrep counting the lines within one error of a word in the text of 60,000 lines"),
    Program("boxes-words", "boxes -d parchment {input}", "words", "boxes",
            "boxes drawing a box around the same text"),
    Program("rapper-ttl", "rapper -q --input turtle --output ntriples {input}", "turtle", "raptor2-utils",
            "Raptor's rapper turning a Turtle graph of 20,000 subjects into N-Triples"),
    Program("potrace-pbm", "potrace -s -o - {input}", "pbm", "potrace",
            "Potrace tracing a bitmap of 1,500 overlapping discs as SVG"),
    Program("mksh-loop", "mksh {input}", "mksh-script", "mksh",
            "the MirBSD Korn shell running a loop of arrays and strings"),
    Program("cflow-c", "cflow {input}", "c-huge", "cflow", "GNU cflow charting the calls of a C file of 4,000 functions"),
    Program("gnuplot-fit", "gnuplot {input}", "gnuplot-script", "gnuplot-nox",
            "gnuplot fitting a parabola to 20,000 points and plotting both on a text terminal"),
    Program("z3-lia", "z3 {input}", "smt-lia", "z3", "Z3 deciding 6,000 linear integer constraints over 1,500 variables"),
    Program("yash-loop", "yash {input}", "yash-script", "yash", "yash running a loop of strings and arithmetic"),
)
# the ninth registration's programs, fixed after the grow cells (stats/cost_model.grown_pairs: a large block grown
# 64 KiB and a page at a time, the grows split between them by the pages they added) were chosen, registered with
# them and measured only after their predictions were committed; chosen as the eighth's were (C++ among them:
# Xerces-C, cvc5, Poppler and qpdf; three readers of one PDF on three libraries of their own)
NINTH = (
    Program("domcount-xml", "DOMCount {input}", "xml", "libxerces-c-samples",
            "Xerces-C building the DOM of the XML of 60,000 records and counting its elements"),
    Program("rxp-xml", "rxp {input}", "xml", "rxp", "RXP parsing the same XML and writing it back"),
    Program("cvc5-lia", "cvc5 {input}", "smt-lia", "cvc5",
            "cvc5 deciding the linear integer constraints Z3 decides in the eighth set"),
    Program("mruby-hash", "mruby {input}", "ruby-script", "mruby", "mruby running the hash script the fourth set's Ruby runs"),
    Program("mujs-loop", "mujs {input}", "js-script", "mujs",
            "MuJS running a JavaScript loop of string-keyed counts and an array of small objects"),
    Program("tcsh-loop", "tcsh -f {input}", "csh-script", "tcsh", "tcsh running a loop that builds a word each turn"),
    Program("bibtool-sort", "bibtool -s {input}", "bib", "bibtool", "BibTool sorting a BibTeX database of 8,000 articles"),
    Program("lpsolve-lp", "lp_solve -S3 {input}", "lp-solve", "lp-solve",
            "lp_solve solving a linear programme of 1,200 bounded variables"),
    Program("remind-year", "remind -s12 {input} 2027-01-01", "remind", "remind",
            "remind laying out a year's calendar of 6,000 reminders"),
    Program("pdftotext-pdf", "pdftotext {input} -", "pdf", "poppler-utils",
            "Poppler's pdftotext extracting the text of a PDF of 400 pages"),
    Program("mutool-pdf", "mutool draw -F txt -o /dev/stdout {input}", "pdf", "mupdf-tools",
            "MuPDF's mutool extracting the same PDF's text"),
    Program("qpdf-check", "qpdf --check {input}", "pdf", "qpdf", "qpdf checking the same PDF's structure"),
)
# the tenth registration's programs, fixed after the small grow cells (stats/cost_model.grown_within: a large block grown
# 256 bytes a step) were chosen, registered before any was measured, and first measured on a machine of its kind
# whose runs the per-call costs had not seen; chosen as the eighth's were (C++ in htmldoc; three interpreters,
# Duktape, S-Lang and Regina REXX; Ghostscript reading the ninth set's PDF)
TENTH = (
    Program("jsonglib-json", "json-glib-format {input}", "json-large", "json-glib-tools",
            "JSON-GLib parsing a JSON document of 40,000 records into a tree and writing it back"),
    Program("bib2xml-bib", "bib2xml {input}", "bib", "bibutils",
            "bibutils converting the BibTeX database of 8,000 articles to MODS XML"),
    Program("duk-loop", "duk {input}", "js-script", "duktape", "Duktape running the JavaScript loop MuJS runs in the ninth set"),
    Program("uconv-words", "uconv -x Any-Upper {input}", "words", "icu-devtools",
            "ICU's uconv transliterating the text of 60,000 lines to upper case"),
    Program("htmldoc-html", "htmldoc --webpage -t ps {input}", "html", "htmldoc",
            "HTMLDOC laying out the HTML page of 4,000 rows as PostScript"),
    Program("xmlindent-xml", "xmlindent {input}", "xml", "xmlindent", "xmlindent indenting the XML of 60,000 records"),
    Program("sparse-c", "sparse {input}", "c-huge", "sparse", "Sparse checking the C file of 4,000 functions"),
    Program("gs-pdf", "gs -q -dNOPAUSE -dBATCH -dSAFER -dLastPage=40 -sDEVICE=txtwrite -sOutputFile=- {input}", "pdf",
            "ghostscript", "Ghostscript extracting the text of the first 40 pages of the ninth set's PDF"),
    Program("slsh-assoc", "slsh {input}", "slang-script", "slsh",
            "S-Lang's slsh counting strings in an associative array of 50,000 keys"),
    Program("rexx-loop", "rexx {input}", "rexx-script", "regina-rexx",
            "Regina REXX counting in a stem of 50,000 tails and building a word each turn"),
    Program("ldns-zone", "ldns-read-zone {input}", "zone", "ldnsutils",
            "ldns reading a DNS zone of 20,000 names (some 30,700 records) and printing it"),
    Program("graph-points", "graph -T svg {input}", "points", "plotutils",
            "GNU plotutils' graph plotting a random walk of 200,000 points as SVG"),
)
SETS = {"first": PROGRAMS, "second": SECOND, "third": THIRD, "fourth": FOURTH, "fifth": FIFTH, "sixth": SIXTH,
        "seventh": SEVENTH, "eighth": EIGHTH, "ninth": NINTH, "tenth": TENTH}
BY_NAME = {p.name: p for programs in SETS.values() for p in programs}


def chosen(names=None, programs: str = "first") -> list[Program]:
    """The programs named (any set's), or else every program of the set `programs` (first to tenth)."""
    if not names:
        if programs not in SETS:
            raise HeapcostError(f"no set of cost-check programs {programs!r}; there are: {', '.join(SETS)}")
        return list(SETS[programs])
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise HeapcostError(f"no cost-check program {', '.join(unknown)}; there are: {', '.join(BY_NAME)}")
    return [BY_NAME[n] for n in names]


def missing_programs(programs) -> list[str]:
    """The packages to install for the programs whose executable this host lacks."""
    def present(word):
        return Path(word).is_file() if "/" in word else shutil.which(word) is not None

    return sorted({p.package for p in programs if not present(p.command.split()[0])})


def commands(programs, inputs: dict[str, Path]) -> dict[str, str]:
    """{name: command line} with each program's input in place."""
    missing = missing_programs(programs)
    if missing:
        raise HeapcostError(f"the cost check runs programs this host lacks: install {', '.join(missing)}")
    return {p.name: p.command.replace("{input}", str(inputs[p.input])) if p.input else p.command for p in programs}


def extra_workloads(programs, inputs: dict[str, Path]) -> str:
    """The EXTRA_WORKLOADS value that brings the programs to a campaign."""
    return ", ".join(f"{name}={cmd}" for name, cmd in commands(programs, inputs).items())
