"""The inputs the cost check's programs (cost_programs.py) read: each written by a generator with a fixed seed, so
the same text gives the same bytes on any host; the C++ unit is preprocessed by this host's g++ from a fixed source,
so its bytes follow the host's libstdc++ headers. Each input's sha256 is registered with the predictions and
recorded by the campaign's run.json: the check compares only runs of the same program on the same inputs.
"""
import functools
import hashlib
import random
import shutil
import subprocess
from pathlib import Path

from analysis.errors import HeapcostError
from analysis.harness.workloads.cost_programs import PROGRAMS
from analysis.paths import BUILD_DIR

INPUTS_DIR = BUILD_DIR / "cost-inputs"  # where the check's registrations, campaigns and profile runs write the inputs


def _words(rng: random.Random, count: int) -> list[str]:
    return ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(count)]


@functools.lru_cache(maxsize=4)
def words_text(lines: int = 60000) -> str:
    """A text of words (the alternation bench's, same seed and shape)."""
    rng = random.Random(2026)
    words = _words(rng, 4000)
    return "\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) for _ in range(lines)) + "\n"


def json_text(records: int = 4000) -> str:
    """A JSON array of small records: a tag, a number, a word list."""
    rng = random.Random(2027)
    words = _words(rng, 500)
    items = []
    for i in range(records):
        tags = ",".join(f'"{rng.choice(words)}"' for _ in range(rng.randint(1, 4)))
        items.append(f'{{"id":{i},"tag":"{rng.choice(words[:60])}","v":{rng.randint(0, 10**6)},"words":[{tags}]}}')
    return "[\n" + ",\n".join(items) + "\n]\n"


def c_unit(functions: int = 30) -> str:
    """A C translation unit that includes nothing: functions of loops, switches and calls."""
    rng = random.Random(2028)
    out = ["int f0(int *a, int n) { return n ? a[0] : 0; }"]
    for i in range(1, functions):
        out.append(f"int f{i}(int *a, int n) {{ int s = {i}; for (int j = 0; j < n; j++) {{ switch ((a[j] + j) % 7) {{ "
                   f"case 0: s += a[j] * {rng.randint(2, 99)}; break; case 1: s ^= a[j] << {rng.randint(1, 9)}; break; "
                   f"case 2: s -= j * {rng.randint(1, 50)}; break; default: s += f{i - 1}(a, j & 3); }} }} return s; }}")
    return "\n".join(out) + "\n"


def cxx_source(functions: int = 6) -> str:
    """A C++ unit over the standard containers (preprocessed by g++ before it is compiled)."""
    rng = random.Random(2029)
    out = ["#include <algorithm>", "#include <map>", "#include <string>", "#include <vector>", ""]
    for i in range(functions):
        out.append(f"std::map<std::string, std::vector<int>> g{i}(const std::vector<std::string> &w) {{\n"
                   f"  std::map<std::string, std::vector<int>> m;\n"
                   f"  for (size_t j = 0; j < w.size(); j++) m[w[j] + \"{rng.randint(0, 999)}\"].push_back(int(j) * {rng.randint(2, 9)});\n"
                   f"  for (auto &kv : m) std::sort(kv.second.begin(), kv.second.end());\n"
                   f"  return m;\n}}")
    return "\n".join(out) + "\n"


def pairs_text(nodes: int = 30000, edges: int = 200000) -> str:
    """The edges of an acyclic graph, one pair of node names a line (each edge from the lower node to the higher)."""
    rng = random.Random(2030)
    names = [f"n{rng.randrange(10**9):09d}" for _ in range(nodes)]
    return "".join(f"{names[a]} {names[b]}\n" for a, b in (sorted(rng.sample(range(nodes), 2)) for _ in range(edges)))


def bc_script(scale: int = 900) -> str:
    return f"scale={scale}\nx = 4*a(1)\ny = e(1)\nz = l(2)\nlength(x*y+z)\nquit\n"


def asm_text(functions: int = 12000) -> str:
    """An x86-64 assembler file of many small functions, local labels, jumps, calls and strings."""
    rng = random.Random(2031)
    regs = ["%rax", "%rbx", "%rcx", "%rdx", "%rsi", "%rdi", "%r8", "%r9"]
    out = ["\t.text"]
    for i in range(functions):
        out += [f"\t.globl\tfn_{i}", f"\t.type\tfn_{i}, @function", f"fn_{i}:"]
        for j in range(rng.randint(4, 16)):
            op = rng.choice(["addq", "subq", "xorq", "movq", "imulq"])
            out.append(f".Lb{i}_{j}:\n\t{op}\t${rng.randint(1, 9999)}, {rng.choice(regs)}")
            if j and rng.random() < 0.3:
                out.append(f"\tjne\t.Lb{i}_{rng.randrange(j)}")
        out += [f"\tcall\tfn_{rng.randrange(functions)}", "\tret", f"\t.size\tfn_{i}, .-fn_{i}"]
    out.append("\t.data")
    for i in range(functions // 2):
        out.append(f"str_{i}:\t.asciz\t\"{''.join(rng.choice('abcdefgh') for _ in range(rng.randint(4, 40)))}\"")
    return "\n".join(out) + "\n"


def po_text(messages: int = 20000) -> str:
    """A gettext catalogue of messages and their translations, words of a fixed seed."""
    rng = random.Random(2032)
    words = _words(rng, 3000)
    out = ['msgid ""', 'msgstr ""', '"Content-Type: text/plain; charset=UTF-8\\n"', ""]
    for i in range(messages):
        out += [f'msgid "{" ".join(rng.choice(words) for _ in range(rng.randint(2, 10)))} {i}"',
                f'msgstr "{" ".join(rng.choice(words) for _ in range(rng.randint(2, 10)))}"', ""]
    return "\n".join(out)


def lex_text(rules: int = 2500) -> str:
    """A flex scanner: a rule per keyword, then identifiers, numbers and the rest."""
    rng = random.Random(2033)
    words = sorted(set(_words(rng, rules * 2)))[:rules]
    out = ["%option noyywrap", "%%", *(f'"{w}"\t{{ return {i + 1}; }}' for i, w in enumerate(words)),
           "[a-z]+[0-9]*\t{ return 9999; }", "[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?\t{ return 9998; }", ".|\\n\t;", "%%"]
    return "\n".join(out) + "\n"


def tcl_script(n: int = 200000) -> str:
    return ("set d [dict create]\nset l {}\n"
            f"for {{set i 0}} {{$i < {n}}} {{incr i}} {{\n"
            "  set k w[expr {($i * 7919) % 40000}]\n  dict lappend d $k $i\n"
            "  if {$i % 5 == 0} { lappend l [string repeat x [expr {$i % 97}]] }\n}\n"
            "puts [dict size $d]\nputs [llength $l]\n")


def makefile_text(targets: int = 10000) -> str:
    """A makefile of many targets, each with its variable, prerequisites made by a pattern rule, and a recipe."""
    rng = random.Random(2034)
    out = ["SHELL := /bin/sh", "CFLAGS := -O2 -Wall", ".PHONY: all", "all: " + " ".join(f"t{i}" for i in range(targets)),
           "\t@:", ""]
    for i in range(targets):
        deps = " ".join(f"s{rng.randrange(targets)}.c" for _ in range(rng.randint(1, 5)))
        out += [f"V{i} := $(CFLAGS) -DX{i}={rng.randint(0, 999)}", f"t{i}: {deps}",
                f"\t@echo cc $(V{i}) -o $@ $^ $(words $^)", ""]
    out.append("%.c:\n\t@echo gen $@")
    return "\n".join(out) + "\n"


def m4_text(macros: int = 800) -> str:
    """m4 definitions of some of the words text's words, then that text, which uses them."""
    words = sorted(set(_words(random.Random(2026), 4000)))[:macros]
    return "".join(f"define(`{w}', `{w.upper()}_$#')dnl\n" for w in words) + words_text()


def lua_script(n: int = 300000) -> str:
    return ("local t, l = {}, {}\n"
            f"for i = 0, {n - 1} do\n"
            "  local k = 'w' .. ((i * 7919) % 40000)\n  local v = t[k]\n  if v == nil then v = {}; t[k] = v end\n"
            "  v[#v + 1] = i\n  if i % 5 == 0 then l[#l + 1] = string.rep('x', i % 97) .. i end\nend\n"
            "local n = 0\nfor _ in pairs(t) do n = n + 1 end\nprint(n, #l)\n")


def xml_text(records: int = 60000) -> str:
    """An XML document of records: an id, a tag, a number, a word list."""
    rng = random.Random(2035)
    words = _words(rng, 600)
    out = ['<?xml version="1.0" encoding="UTF-8"?>', "<records>"]
    for i in range(records):
        tags = "".join(f"<w>{rng.choice(words)}</w>" for _ in range(rng.randint(1, 5)))
        out.append(f'<r id="{i}" tag="{rng.choice(words[:60])}"><v>{rng.randint(0, 10**6)}</v><ws>{tags}</ws></r>')
    return "\n".join(out + ["</records>"]) + "\n"


def dc_script() -> str:
    return ("900k 2v 3v * 5v / p 7 3000^ 3 2000^ / p 13 1500^ 11 1700^ * 17 1200^ % p "
            "0k 2 9000^ 2 8999^ - p 3 20000^ 7 9000^ / p\n")


def gperf_text(keywords: int = 1500) -> str:
    words = sorted(set(_words(random.Random(2036), keywords * 2)))[:keywords]
    return "%%\n" + "\n".join(words) + "\n%%\n"


def symbols_text(symbols: int = 150000) -> str:
    """Mangled C++ names, one a line: a nested name of two to four parts and one to four parameters."""
    rng = random.Random(2037)
    words = _words(rng, 800)
    params = ["i", "d", "PKc", "RKi", "l", "Pv", "b", "j", "f", "RKSt6string", "St6vectorIiSaIiEE"]
    out = []
    for _ in range(symbols):
        parts = "".join(f"{len(w)}{w}" for w in (rng.choice(words) for _ in range(rng.randint(2, 4))))
        out.append(f"_ZN{parts}E" + "".join(rng.choice(params) for _ in range(rng.randint(1, 4))))
    return "\n".join(out) + "\n"


def roff_text(paragraphs: int = 3000) -> str:
    """A text for troff: a heading macro, strings and a number register, and paragraphs of words."""
    rng = random.Random(2038)
    words = _words(rng, 2000)
    out = [".ll 6i", ".de HD", ".sp", ".ft B", "\\\\$1", ".ft R", ".br", "..", ".nr n 0 1"]
    for i in range(paragraphs):
        if i % 20 == 0:
            out.append(f'.ds s{i} {" ".join(rng.choice(words) for _ in range(4))}')
            out.append(f'.HD "Section \\n+n \\*[s{i}]"')
        out.append(" ".join(rng.choice(words) for _ in range(rng.randint(20, 60))))
        out.append(".sp")
    return "\n".join(out) + "\n"


def cmake_script(n: int = 20000) -> str:
    return ('set(l "")\nset(s "")\n'
            f"foreach(i RANGE 0 {n})\n"
            '  math(EXPR k "(${i} * 7919) % 4000")\n  list(APPEND l "w${k}")\n  string(APPEND s "x${i}")\n'
            'endforeach()\nlist(SORT l)\nlist(REMOVE_DUPLICATES l)\nlist(LENGTH l n)\nstring(LENGTH "${s}" m)\n'
            'message("${n} ${m}")\n')


def ninja_text(edges: int = 10000) -> str:
    """A ninja file: sources made by a rule without inputs, objects compiled from them, one link of all."""
    rng = random.Random(2039)
    out = ["rule cc", "  command = cc -O2 $flags -c $in -o $out", "rule gen", "  command = gen $out", "rule link",
           "  command = cc $in -o $out", ""]
    out += [f"build src{j}.c: gen" for j in range(edges // 2)]
    for i in range(edges):
        out.append(f"build obj{i}.o: cc src{rng.randrange(edges // 2)}.c\n  flags = -DX{i}={rng.randint(0, 999)}")
    out += ["build all: link " + " ".join(f"obj{i}.o" for i in range(edges)), "default all"]
    return "\n".join(out) + "\n"


def gettext_c(messages: int = 30000) -> str:
    """A C file whose messages are marked for translation, _("...")."""
    rng = random.Random(2040)
    words = _words(rng, 3000)
    out = ["#define _(s) s", "void f(const char *);", "void g(void) {"]
    out += [f'  f(_("{" ".join(rng.choice(words) for _ in range(rng.randint(2, 10)))} {i}"));' for i in range(messages)]
    return "\n".join(out + ["}"]) + "\n"


def bash_script(n: int = 60000) -> str:
    return ("declare -A n\ns=''\n"
            f"for ((i = 0; i < {n}; i++)); do\n"
            "  k=w$(( (i * 7919) % 4000 ))\n  n[$k]=$(( ${n[$k]:-0} + 1 ))\n  s+=x\ndone\necho ${#n[@]} ${#s}\n")


def ruby_script(n: int = 300000) -> str:
    return ("t = {}\nl = []\n"
            f"{n}.times do |i|\n"
            "  k = \"w#{(i * 7919) % 40000}\"\n  (t[k] ||= []) << i\n  l << ('x' * (i % 97)) + i.to_s if i % 5 == 0\nend\n"
            "puts t.size, l.size\n")


def zsh_script(n: int = 40000) -> str:
    return ("typeset -A n\ns=''\n"
            f"for ((i = 0; i < {n}; i++)); do\n"
            "  k=w$(( (i * 7919) % 4000 ))\n  n[$k]=$(( ${n[$k]:-0} + 1 ))\n  s+=x\ndone\necho ${#n} ${#s}\n")


def xslt_self(records: int = 20000) -> str:
    """An XSLT stylesheet holding its own data (read back through document('')): it groups the records by tag
    (Muenchian grouping over a key), sorted, with each group's count and sum."""
    rng = random.Random(2041)
    words = _words(rng, 600)
    out = ['<?xml version="1.0"?>',
           '<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform" xmlns:d="urn:data">',
           '<xsl:output method="text"/>', '<xsl:key name="by-tag" match="d:r" use="@tag"/>',
           '<xsl:template match="/">',
           "<xsl:for-each select=\"document('')//d:r[generate-id() = generate-id(key('by-tag', @tag)[1])]\">",
           '<xsl:sort select="@tag"/>',
           "<xsl:value-of select=\"@tag\"/><xsl:text> </xsl:text><xsl:value-of select=\"count(key('by-tag', @tag))\"/>",
           "<xsl:text> </xsl:text><xsl:value-of select=\"sum(key('by-tag', @tag)/@v)\"/><xsl:text>&#10;</xsl:text>",
           "</xsl:for-each></xsl:template>", "<d:records>"]
    for i in range(records):
        out.append(f'<d:r id="{i}" tag="{rng.choice(words[:300])}" v="{rng.randint(0, 999)}">'
                   + "".join(f"<d:w>{rng.choice(words)}</d:w>" for _ in range(rng.randint(1, 4))) + "</d:r>")
    return "\n".join(out + ["</d:records>", "</xsl:stylesheet>"]) + "\n"


def nasm_text(functions: int = 6000) -> str:
    """A NASM file of many small functions written through a macro, local labels, jumps, calls and strings."""
    rng = random.Random(2042)
    regs = ["rax", "rbx", "rcx", "rdx", "rsi", "rdi", "r8", "r9"]
    out = ["%macro addk 2", "  add %1, %2", "%endmacro", "section .text"]
    for i in range(functions):
        out += [f"global fn_{i}", f"fn_{i}:"]
        for j in range(rng.randint(4, 16)):
            out.append(f".b{j}: addk {rng.choice(regs)}, {rng.randint(1, 9999)}")
            if j and rng.random() < 0.3:
                out.append(f"  jne .b{rng.randrange(j)}")
        out += [f"  call fn_{rng.randrange(functions)}", "  ret"]
    out.append("section .data")
    for i in range(functions // 2):
        out.append(f"str_{i}: db \"{''.join(rng.choice('abcdefgh') for _ in range(rng.randint(4, 40)))}\", 0")
    return "\n".join(out) + "\n"


def dot_text(nodes: int = 700, edges: int = 1400) -> str:
    """A directed acyclic graph for dot: each edge from the lower node to the higher."""
    rng = random.Random(2043)
    out = ["digraph g {"] + [f"  n{a} -> n{b};" for a, b in (sorted(rng.sample(range(nodes), 2)) for _ in range(edges))]
    return "\n".join(out + ["}"]) + "\n"


def eqn_text(equations: int = 4000) -> str:
    """Displayed equations of subscripts, superscripts, fractions, roots and sums, and inline ones, for eqn."""
    rng = random.Random(2046)
    out = [".EQ", "delim $$", ".EN"]
    for i in range(equations):
        out.append(f".EQ\nx sub {i} = {{ a sup {rng.randint(2, 9)} + b over {{ c + {rng.randint(1, 99)} }} }} times "
                   f"sqrt {{ y sub {i} }} + sum from k=1 to {rng.randint(2, 50)} k sup 2\n.EN\nText $alpha sub {i}$ line.")
    return "\n".join(out) + "\n"


def patterns_text(words: int = 60000) -> str:
    """A sorted list of distinct words, one a line."""
    return "\n".join(sorted(set(_words(random.Random(2045), words)))) + "\n"


def ksh_script(n: int = 40000) -> str:
    return ("typeset -A n\ns=''\n"
            f"for ((i = 0; i < {n}; i++)); do\n"
            "  k=w$(( (i * 7919) % 4000 ))\n  n[$k]=$(( ${n[$k]:-0} + 1 ))\n  s+=x\ndone\necho ${#n[@]} ${#s}\n")


def yacc_text(rules: int = 1500) -> str:
    """A yacc grammar of many rules, each reachable from the start: alternatives of tokens and later rules."""
    rng = random.Random(2044)
    toks = [f"T{i}" for i in range(200)]
    out = ["%token " + " ".join(toks), "%%", "start: r0 ;"]
    for i in range(rules):
        alts = []
        for a in range(rng.randint(1, 4)):
            syms = [rng.choice(toks) for _ in range(rng.randint(1, 5))]
            if i + 1 < rules and a == 0:
                syms.insert(rng.randrange(len(syms) + 1), f"r{i + 1}")
            elif i + 1 < rules and rng.random() < 0.4:
                syms.insert(rng.randrange(len(syms) + 1), f"r{rng.randrange(i + 1, rules)}")
            alts.append(" ".join(syms))
        out.append(f"r{i}: " + " | ".join(alts) + " ;")
    return "\n".join(out + ["%%"]) + "\n"


def re2c_text(rules: int = 2000) -> str:
    """A C function whose re2c block matches keywords, identifiers and numbers."""
    words = sorted(set(_words(random.Random(2048), rules * 2)))[:rules]
    out = ["int lex(const char *YYCURSOR) {", "  const char *YYMARKER;", "  /*!re2c", "  re2c:define:YYCTYPE = char;",
           "  re2c:yyfill:enable = 0;", *(f'  "{w}" {{ return {i + 1}; }}' for i, w in enumerate(words)),
           "  [a-z]+ { return 9999; }", "  [0-9]+ { return 9998; }", "  * { return 0; }", "  */", "}"]
    return "\n".join(out) + "\n"


def lp_text(variables: int = 1200, constraints: int = 800) -> str:
    """A linear programme in CPLEX LP format: bounded variables, constraints of 25 terms each."""
    rng = random.Random(2049)
    out = ["Maximize", " obj: " + " + ".join(f"{rng.randint(1, 20)} x{j}" for j in range(variables)), "Subject To"]
    for i in range(constraints):
        out.append(f" c{i}: " + " + ".join(f"{rng.randint(1, 9)} x{j}" for j in sorted(rng.sample(range(variables), 25)))
                   + f" <= {rng.randint(100, 1000)}")
    out += ["Bounds", *(f" 0 <= x{j} <= {rng.randint(5, 50)}" for j in range(variables))]
    return "\n".join(out + ["End"]) + "\n"


def journal_text(transactions: int = 20000) -> str:
    """A ledger journal: each transaction a payee, an expense account of 200 and the checking account."""
    rng = random.Random(2050)
    accounts = [f"Expenses:{w.title()}" for w in _words(rng, 200)]
    out = []
    for i in range(transactions):
        out += [f"2025/{1 + i % 12:02d}/{1 + i % 28:02d} Payee {i % 500}",
                f"    {rng.choice(accounts)}  ${rng.randint(1, 99999) / 100:.2f}", "    Assets:Checking", ""]
    return "\n".join(out)


def tbl_text(tables: int = 300, rows: int = 40) -> str:
    """Boxed tables of a word, a number and a note, for tbl."""
    rng = random.Random(2051)
    words = _words(rng, 500)
    out = []
    for t in range(tables):
        out += [".TS", "box tab(|);", "l | n | l.", "Name|Value|Note", "_"]
        out += [f"{rng.choice(words)}|{rng.randint(0, 99999)}|{' '.join(rng.choice(words) for _ in range(4))}"
                for _ in range(rows)]
        out += [".TE", f"Table {t} ends here."]
    return "\n".join(out) + "\n"


def pic_text(pictures: int = 400) -> str:
    """Pictures of boxes, arrows, circles and dashed lines, for pic."""
    rng = random.Random(2052)
    out = []
    for p in range(pictures):
        out += [".PS", *(f'box "b{p}_{i}"; arrow; circle rad {rng.randint(1, 5) / 10} "c{i}"; move; '
                         "line from last circle.e to last box.w dashed" for i in range(15)), ".PE"]
    return "\n".join(out) + "\n"


def markdown_text(sections: int = 6000) -> str:
    """A CommonMark document: headings, paragraphs with emphasis, code and links, lists and block quotes."""
    rng = random.Random(2060)
    words = _words(rng, 1500)
    out = []
    for i in range(sections):
        w = lambda k: " ".join(rng.choice(words) for _ in range(k))  # noqa: E731
        out += [f"## {w(3)} {i}", "", f"{w(12)} *{w(2)}* `{w(1)}` [{w(2)}](http://example.org/{i}) {w(10)}", ""]
        if i % 3 == 0:
            out += [f"- {w(4)}" for _ in range(4)] + [""]
        if i % 5 == 0:
            out += [f"> {w(15)}", ""]
    return "\n".join(out) + "\n"


def scss_text(rules: int = 3000) -> str:
    """A Sass stylesheet: variables, a mixin and nested rules with arithmetic."""
    rng = random.Random(2061)
    words = _words(rng, 400)
    out = ["$base: 4px;", "@mixin box($w) { width: $w * 2; padding: $base; }"]
    for i in range(rules):
        out.append(f".{rng.choice(words)}-{i} {{ color: #{rng.randrange(16 ** 6):06x}; @include box({rng.randint(1, 99)}px);"
                   f" .{rng.choice(words)} {{ margin: $base * {rng.randint(1, 9)}; &:hover {{ opacity: 0.{rng.randint(1, 9)}; }} }} }}")
    return "\n".join(out) + "\n"


def html_text(rows: int = 4000) -> str:
    """An HTML page: a table of rows of words and numbers, and paragraphs with links and emphasis."""
    rng = random.Random(2062)
    words = _words(rng, 800)
    w = lambda k: " ".join(rng.choice(words) for _ in range(k))  # noqa: E731
    out = ["<html><head><title>records</title></head><body>", "<table>"]
    out += [f"<tr><td>{i}</td><td>{w(3)}</td><td>{rng.randint(0, 10 ** 6)}</td></tr>" for i in range(rows)]
    out.append("</table>")
    out += [f'<p>{w(10)} <a href="#{i}">{w(2)}</a> <em>{w(3)}</em> {w(8)}</p>' for i in range(rows)]
    return "\n".join(out + ["</body></html>"]) + "\n"


def rec_text(records: int = 20000) -> str:
    """A GNU recutils database: a record descriptor and records of a name, a size and a tag."""
    rng = random.Random(2063)
    words = _words(rng, 700)
    out = ["%rec: Item", "%type: Size int", ""]
    for i in range(records):
        out += [f"Name: {rng.choice(words)}-{i}", f"Size: {rng.randint(0, 1000)}", f"Tag: {rng.choice(words[:50])}", ""]
    return "\n".join(out)


def man_text(sections: int = 1500) -> str:
    """A manual page in the man macros: sections, tagged paragraphs, bold and italic words."""
    rng = random.Random(2064)
    words = _words(rng, 1200)
    w = lambda k: " ".join(rng.choice(words) for _ in range(k))  # noqa: E731
    out = ['.TH RECORDS 1 "2026-12-07" "heapcost" "User Commands"', ".SH NAME", "records \\- generated text"]
    for i in range(sections):
        out += [f".SH {w(2).upper()} {i}", w(30), ".TP", f".B {w(1)}", w(15), ".PP", f"{w(10)} \\fI{w(2)}\\fP {w(8)}"]
    return "\n".join(out) + "\n"


def calc_script(n: int = 3000) -> str:
    """A calc (apcalc) script: the first n factorials, each reduced modulo a prime, summed."""
    return (f"define f(n) {{ local s = 0, i; for (i = 1; i <= n; i++) s += fact(i) % 1000003; return s; }}\n"
            f"print f({n});\n")


def rtf_text(paragraphs: int = 6000) -> str:
    """An RTF document: a font and a colour table, then paragraphs of words in bold, italic and colour."""
    rng = random.Random(2065)
    words = _words(rng, 1500)
    w = lambda k: " ".join(rng.choice(words) for _ in range(k))  # noqa: E731
    out = ["{\\rtf1\\ansi\\deff0{\\fonttbl{\\f0 Times;}{\\f1 Courier;}}{\\colortbl;\\red200\\green0\\blue0;}"]
    for i in range(paragraphs):
        out.append(f"{{\\pard\\f{i % 2} {w(12)} {{\\b {w(2)}}} {w(6)} {{\\i {w(3)}}} {{\\cf1 {w(2)}}} {w(8)}\\par}}")
    return "\n".join(out + ["}"]) + "\n"


def turtle_text(subjects: int = 20000) -> str:
    """A Turtle graph: each subject typed, named, weighed and linked to two others."""
    rng = random.Random(2051)
    out = ["@prefix ex: <http://example.org/> .", "@prefix foaf: <http://xmlns.com/foaf/0.1/> ."]
    for i in range(subjects):
        name = "".join(rng.choice("abcdefghij") for _ in range(rng.randint(4, 12)))
        out.append(f'ex:item{i} a ex:Thing ; foaf:name "{name}" ; ex:weight {rng.randint(1, 999)} ; '
                   f"ex:links ex:item{rng.randrange(subjects)}, ex:item{rng.randrange(subjects)} .")
    return "\n".join(out) + "\n"


def pbm_image(side: int = 1600, discs: int = 1500) -> str:
    """A plain bitmap (PBM, P1): discs of radius 5-40 drawn by exclusive or, so overlaps make holes."""
    rng = random.Random(2054)
    bits = bytearray(side * side)
    for _ in range(discs):
        cx, cy, r = rng.randrange(side), rng.randrange(side), rng.randint(5, 40)
        for y in range(max(0, cy - r), min(side, cy + r + 1)):
            half = int((r * r - (y - cy) ** 2) ** 0.5)
            for x in range(max(0, cx - half), min(side, cx + half + 1)):
                bits[y * side + x] ^= 1
    rows = (" ".join("01"[b] for b in bits[y * side:(y + 1) * side]) for y in range(side))
    return f"P1\n{side} {side}\n" + "\n".join(rows) + "\n"


def mksh_script(n: int = 20000) -> str:
    """A mksh loop: an indexed array of 2,000 slots refilled, a string grown and cut from the front."""
    return "\n".join(["set -A keys", "i=0", "s=''", f"while (( i < {n} )); do", "  w=k$(( (i * 7919) % 5000 ))",
                      "  keys[i % 2000]=$w$i", '  s="$s${w}"', "  (( ${#s} > 4000 )) && s=${s#" + "?" * 32 + "}",
                      "  i=$(( i + 1 ))", "done", "print ${#keys[*]} ${#s}"]) + "\n"


def yash_script(n: int = 30000) -> str:
    """A yash loop: a string grown and cut from the front, and counted words."""
    return "\n".join(["s=''", "i=0", "n=0", f"while [ $i -lt {n} ]; do", "  w=k$(( (i * 7919) % 5000 ))",
                      '  s="$s$w"', "  if [ ${#s} -gt 4000 ]; then s=${s#" + "?" * 32 + "}; n=$((n + 1)); fi",
                      "  i=$((i + 1))", "done", "echo $n ${#s}"]) + "\n"


def gnuplot_script(points: int = 20000) -> str:
    """A gnuplot script: noisy points of a parabola in a data block, fitted and plotted on a text terminal."""
    rng = random.Random(2052)
    data = (f"{i / 100:.2f} {0.5 * (i / 100) ** 2 - 3 * i / 100 + 7 + rng.gauss(0, 5):.3f}" for i in range(points))
    return "\n".join(["set terminal dumb 120 40", "set samples 5000", "f(x) = a*x**2 + b*x + c", "$data << EOD",
                      *data, "EOD", "set fit quiet", "fit f(x) $data using 1:2 via a,b,c",
                      "plot $data using 1:2 with dots, f(x)", "print a, b, c"]) + "\n"


def smt_lia(variables: int = 1500) -> str:
    """An SMT-LIB problem in linear integer arithmetic: three random difference-like constraints per variable."""
    rng = random.Random(2053)
    out = ["(set-logic QF_LIA)", *(f"(declare-const x{i} Int)" for i in range(variables))]
    for i in range(variables):
        for _ in range(3):
            j, k = rng.randrange(variables), rng.randrange(variables)
            out.append(f"(assert (<= (+ x{i} (* {rng.randint(1, 9)} x{j})) (+ x{k} {rng.randint(10, 99)})))")
        out.append(f"(assert (>= x{i} 0))")
    return "\n".join(out + ["(check-sat)", "(exit)"]) + "\n"


def _assembled(folder: Path) -> Path:
    """The generated assembler file assembled by this host's GNU as (its bytes follow the host's binutils)."""
    found = shutil.which("as")
    if found is None:
        raise HeapcostError("the cost check's object file is assembled by GNU as: install binutils")
    src = _write(folder / "unit.s", asm_text())
    out = folder / "unit.o"
    done = subprocess.run([found, "-o", str(out), str(src)], capture_output=True, text=True)
    if done.returncode != 0:
        raise HeapcostError(f"as failed on the cost check's assembler file: {done.stderr.strip().splitlines()[-1:]}")
    return out


def js_script(n: int = 200000) -> str:
    """A JavaScript loop: counts in an object keyed by strings, and an array of small objects cut in half whenever
    it passes 5,000, printed as JSON at the end."""
    return "\n".join([
        "var m = {}; var a = [];",
        f"for (var i = 0; i < {n}; i++) {{",
        '  var k = "k" + (i * 7919 % 50021); m[k] = (m[k] || 0) + 1;',
        '  a.push({n: i, s: k + ":" + i}); if (a.length > 5000) a = a.slice(2500);',
        "}",
        "var n = 0; for (var k in m) n += m[k];",
        "print(n, a.length, JSON.stringify(a.slice(0, 100)).length);"]) + "\n"


def csh_script(n: int = 20000) -> str:
    """A C shell loop: a word built from the counter each turn, the last kept."""
    return "\n".join(["set i = 0", 'set s = ""', f"while ($i < {n})", '  set w = "w$i"', '  set s = "$w"', "  @ i++",
                      "end", "echo $i $s"]) + "\n"


def bib_text(entries: int = 8000) -> str:
    """A BibTeX database of articles, one to four authors each, under keys in no order."""
    rng = random.Random(2061)
    names = ["Smith", "Lee", "Garcia", "Chen", "Kumar", "Novak", "Okafor", "Silva", "Ivanova", "Haddad"]
    out = []
    for i in range(entries):
        authors = " and ".join(f"{rng.choice(names)}, {chr(65 + rng.randrange(26))}." for _ in range(rng.randint(1, 4)))
        out.append(f"@article{{key{i * 7919 % 100003},\n  author = {{{authors}}},\n"
                   f"  title = {{On the {rng.choice(['cost', 'theory', 'practice', 'design'])} of item {i}}},\n"
                   f"  journal = {{Journal {rng.randrange(50)}}},\n  year = {1950 + rng.randrange(75)},\n"
                   f"  pages = {{{rng.randint(1, 499)}--{rng.randint(500, 900)}}}\n}}\n")
    return "\n".join(out)


def lp_solve_text(variables: int = 1200, constraints: int = 800) -> str:
    """The lp_solve format's linear programme: maximise a positive sum over bounded variables, each constraint a
    sum of 12 of them."""
    rng = random.Random(2062)
    lines = ["max: " + " + ".join(f"{rng.randint(1, 19)} x{j}" for j in range(variables)) + ";"]
    for i in range(constraints):
        terms = " + ".join(f"{rng.randint(1, 8)} x{j}" for j in rng.sample(range(variables), 12))
        lines.append(f"c{i}: {terms} <= {rng.randint(50, 499)};")
    lines += [f"x{j} <= {rng.randint(5, 39)};" for j in range(variables)]
    return "\n".join(lines) + "\n"


def remind_text(reminders: int = 6000) -> str:
    """A remind file: one dated message a line, on random days of one year."""
    rng = random.Random(2063)
    months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    return "".join(f"REM {rng.randint(1, 28)} {rng.choice(months)} 2027 MSG event {i} at %b\n" for i in range(reminders))


def pdf_document(pages: int = 400, lines: int = 60) -> str:
    """A PDF of text pages (ASCII throughout, its cross-reference table exact): on each page, lines of words in
    Helvetica, each line its own text object."""
    rng = random.Random(2064)
    words = ["alloc", "heap", "page", "block", "slab", "arena", "cache", "free", "chunk", "size", "class", "bin",
             "guard", "canary", "quarantine"]
    objects = {1: "<< /Type /Catalog /Pages 2 0 R >>", 3: "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"}
    kids = []
    for page in range(pages):
        number = 4 + 2 * page
        text = "\n".join(f"BT /F1 9 Tf 40 {780 - 12.5 * line:g} Td "
                         f"({' '.join(rng.choice(words) for _ in range(rng.randint(6, 13)))} {page}.{line}) Tj ET"
                         for line in range(lines))
        objects[number + 1] = f"<< /Length {len(text)} >>\nstream\n{text}\nendstream"
        objects[number] = (f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> "
                           f">> /Contents {number + 1} 0 R >>")
        kids.append(number)
    objects[2] = f"<< /Type /Pages /Kids [{' '.join(f'{k} 0 R' for k in kids)}] /Count {pages} >>"
    out, offsets = "%PDF-1.4\n", {}
    for number in sorted(objects):
        offsets[number] = len(out)
        out += f"{number} 0 obj\n{objects[number]}\nendobj\n"
    size = max(objects) + 1
    xref = len(out)
    out += f"xref\n0 {size}\n0000000000 65535 f \n" + "".join(f"{offsets[k]:010d} 00000 n \n" for k in range(1, size))
    return out + f"trailer\n<< /Size {size} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"


def slang_script(n: int = 300000) -> str:
    """An S-Lang loop: counts in an associative array keyed by strings, 50,000 keys, and a string built each turn."""
    return "\n".join([
        "variable a = Assoc_Type[Integer_Type, 0];", "variable s = \"\", i;",
        f"for (i = 0; i < {n}; i++) {{",
        "  variable k = sprintf(\"k%d\", (i * 7919) mod 50021);", "  a[k] += 1;", "  s = k + \":\" + string(i);", "}",
        "vmessage(\"%d %s\", length(a), s);"]) + "\n"


def rexx_script(n: int = 200000) -> str:
    """A REXX loop: a stem keyed by a number, 50,021 tails, and a word built from the counter each turn."""
    return "\n".join(["n = 0", "s. = 0", f"do i = 1 to {n}", "  k = (i * 7919) // 50021", "  s.k = s.k + 1",
                      "  w = 'k'k':'i", "  n = n + length(w)", "end", "say n"]) + "\n"


def zone_text(names: int = 20000) -> str:
    """A DNS zone: an A record for each of the names, a TXT record for every third and an MX for every fifth."""
    rng = random.Random(2063)
    out = ["$ORIGIN example.org.", "$TTL 3600", "@ IN SOA ns1 hostmaster 2026120801 7200 3600 1209600 3600",
           "@ IN NS ns1", "ns1 IN A 192.0.2.1"]
    for i in range(names):
        name = "".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(3, 10))) + str(i)
        out.append(f"{name} IN A 10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}")
        if i % 3 == 0:
            out.append(f'{name} IN TXT "v={rng.randint(0, 10 ** 9)} note{i}"')
        if i % 5 == 0:
            out.append(f"{name} IN MX 10 mail{i % 97}.example.org.")
    return "\n".join(out) + "\n"


def points_text(points: int = 200000) -> str:
    """A series of x y points, one a line, y a random walk, for a plotting program."""
    rng = random.Random(2064)
    y, out = 0.0, []
    for i in range(points):
        y += rng.gauss(0, 1)
        out.append(f"{i * 0.01:.2f} {y:.4f}")
    return "\n".join(out) + "\n"


def _write(path: Path, text: str) -> Path:
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path


def _preprocessed(folder: Path, compiler: str = "g++") -> Path:
    """The C++ unit preprocessed by this host's g++ (the first set's cc1plus) or clang++ (the second set's clang)."""
    found = (shutil.which("g++-12") or shutil.which("g++")) if compiler == "g++" else \
        (shutil.which("clang++-14") or shutil.which("clang++"))
    if found is None:
        raise HeapcostError(f"the cost check's C++ unit is preprocessed by {compiler}: install "
                            f"{'g++-12' if compiler == 'g++' else 'clang-14'}")
    src = _write(folder / "unit.cc", cxx_source())
    out = folder / ("unit.ii" if compiler == "g++" else "unit-clang.ii")
    done = subprocess.run([found, "-E", "-P", "-std=gnu++17", str(src), "-o", str(out)], capture_output=True, text=True)
    if done.returncode != 0:
        raise HeapcostError(f"{compiler} -E failed on the cost check's C++ unit: {done.stderr.strip().splitlines()[-1:]}")
    return out


# {input name: how to write it into a folder}; a set's programs write only the inputs they read
INPUTS = {
    "words": lambda folder: _write(folder / "words.txt", words_text()),
    "json": lambda folder: _write(folder / "records.json", json_text()),
    "c-unit": lambda folder: _write(folder / "unit.c", c_unit()),
    "cxx-unit": lambda folder: _preprocessed(folder, "g++"),
    "pairs": lambda folder: _write(folder / "pairs.txt", pairs_text()),
    "bc-script": lambda folder: _write(folder / "digits.bc", bc_script()),
    "cxx-unit-clang": lambda folder: _preprocessed(folder, "clang++"),
    "asm": lambda folder: _write(folder / "unit.s", asm_text()),
    "po": lambda folder: _write(folder / "catalog.po", po_text()),
    "lex": lambda folder: _write(folder / "scanner.l", lex_text()),
    "tcl-script": lambda folder: _write(folder / "dict.tcl", tcl_script()),
    "makefile": lambda folder: _write(folder / "build.mk", makefile_text()),
    "m4-text": lambda folder: _write(folder / "macros.m4", m4_text()),
    "lua-script": lambda folder: _write(folder / "tables.lua", lua_script()),
    "xml": lambda folder: _write(folder / "records.xml", xml_text()),
    "dc-script": lambda folder: _write(folder / "arith.dc", dc_script()),
    "gperf-keywords": lambda folder: _write(folder / "keywords.gperf", gperf_text()),
    "symbols": lambda folder: _write(folder / "symbols.txt", symbols_text()),
    "roff": lambda folder: _write(folder / "text.roff", roff_text()),
    "cmake-script": lambda folder: _write(folder / "lists.cmake", cmake_script()),
    "ninja": lambda folder: _write(folder / "build.ninja", ninja_text()),
    "gettext-c": lambda folder: _write(folder / "messages.c", gettext_c()),
    "bash-script": lambda folder: _write(folder / "assoc.sh", bash_script()),
    "object": _assembled,
    "ruby-script": lambda folder: _write(folder / "hash.rb", ruby_script()),
    "zsh-script": lambda folder: _write(folder / "assoc.zsh", zsh_script()),
    "xslt-self": lambda folder: _write(folder / "group.xsl", xslt_self()),
    "nasm-asm": lambda folder: _write(folder / "unit.asm", nasm_text()),
    "dot-graph": lambda folder: _write(folder / "graph.dot", dot_text()),
    "eqn-text": lambda folder: _write(folder / "equations.roff", eqn_text()),
    "patterns": lambda folder: _write(folder / "patterns.txt", patterns_text()),
    "ksh-script": lambda folder: _write(folder / "assoc.ksh", ksh_script()),
    "yacc-grammar": lambda folder: _write(folder / "grammar.y", yacc_text()),
    "re2c-lexer": lambda folder: _write(folder / "lexer.re", re2c_text()),
    "lp-model": lambda folder: _write(folder / "model.lp", lp_text()),
    "ledger-journal": lambda folder: _write(folder / "journal.dat", journal_text()),
    "tbl-text": lambda folder: _write(folder / "tables.roff", tbl_text()),
    "pic-text": lambda folder: _write(folder / "pictures.roff", pic_text()),
    "c-large": lambda folder: _write(folder / "large.c", c_unit(400)),
    "json-large": lambda folder: _write(folder / "large.json", json_text(40000)),
    "markdown": lambda folder: _write(folder / "document.md", markdown_text()),
    "scss": lambda folder: _write(folder / "style.scss", scss_text()),
    "html": lambda folder: _write(folder / "page.html", html_text()),
    "rec": lambda folder: _write(folder / "items.rec", rec_text()),
    "man-page": lambda folder: _write(folder / "records.1", man_text()),
    "calc-script": lambda folder: _write(folder / "factorials.cal", calc_script()),
    "rtf": lambda folder: _write(folder / "document.rtf", rtf_text()),
    "turtle": lambda folder: _write(folder / "graph.ttl", turtle_text()),
    "pbm": lambda folder: _write(folder / "discs.pbm", pbm_image()),
    "mksh-script": lambda folder: _write(folder / "loop.mksh", mksh_script()),
    "c-huge": lambda folder: _write(folder / "huge.c", c_unit(4000)),
    "gnuplot-script": lambda folder: _write(folder / "fit.gp", gnuplot_script()),
    "smt-lia": lambda folder: _write(folder / "chain.smt2", smt_lia()),
    "yash-script": lambda folder: _write(folder / "loop.yash", yash_script()),
    "js-script": lambda folder: _write(folder / "loop.js", js_script()),
    "csh-script": lambda folder: _write(folder / "loop.csh", csh_script()),
    "bib": lambda folder: _write(folder / "refs.bib", bib_text()),
    "lp-solve": lambda folder: _write(folder / "model.lp_solve", lp_solve_text()),
    "remind": lambda folder: _write(folder / "dates.rem", remind_text()),
    "pdf": lambda folder: _write(folder / "text.pdf", pdf_document()),
    "slang-script": lambda folder: _write(folder / "assoc.sl", slang_script()),
    "rexx-script": lambda folder: _write(folder / "loop.rexx", rexx_script()),
    "zone": lambda folder: _write(folder / "example.org.zone", zone_text()),
    "points": lambda folder: _write(folder / "walk.txt", points_text()),
}


def write_inputs(folder: Path, programs=PROGRAMS) -> dict[str, Path]:
    """The inputs `programs` read (default the first set's), in `folder`, written only where their bytes differ:
    {input name: path}."""
    folder.mkdir(parents=True, exist_ok=True)
    return {name: INPUTS[name](folder) for name in dict.fromkeys(p.input for p in programs if p.input)}


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
