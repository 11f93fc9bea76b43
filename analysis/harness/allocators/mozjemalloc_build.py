"""mozjemalloc (Firefox's allocator, memory/build/) from Debian's firefox-esr source as an LD_PRELOAD library.

Firefox links mozjemalloc into its executable and exports malloc, free, ... under their plain names
(memory/build/mozmemory_wrap.h: with MOZ_MEMORY_IMPL and no XP_WIN, mozmem_malloc_impl(a) is `a`). Here the
same sources memory/build/moz.build lists for MOZ_MEMORY (mozjemalloc.cpp, mozmemory_wrap.cpp, Mutex.cpp)
are compiled with g++ as a release build (no MOZ_DEBUG, so no MALLOC_RUNTIME_CONFIG: every option is a
compile-time constant, as Firefox ships it), with what they need from mfbt and mozglue (Assertions.cpp,
RandomNum.cpp, TaggedAnonymousMemory.cpp, Printf.cpp and double-conversion, which Firefox links into the
same executable), into one shared library with no undefined symbol left but libc's.

Poisoning of freed memory (memory/build/mozjemalloc.cpp, 140.12.0esr): `opt_poison` is SOME unless
EARLY_BETA_OR_EARLIER is defined, then ALL (lines 1944-1948); SOME fills the first `opt_poison_size` = 256
bytes of a freed block with kAllocPoison 0xe5 (line 1951, MaybePoison at 2036-2050, called from the free
path at 4735-4738 and on shrinking realloc); MALLOC_OPTIONS letters q/Q/QQ exist only under
MALLOC_RUNTIME_CONFIG (debug builds, 5457-5469), so a release build cannot be switched at run time.
The three builds:
  mozjemalloc-poison       release as Firefox ESR ships it: first 256 bytes (no define changed)
  mozjemalloc-poison-full  -DEARLY_BETA_OR_EARLIER: the whole block, as nightly and early beta (in the files
                           compiled here that define changes nothing else; PHC, where it also appears, is off)
  mozjemalloc              poisoning compiled out: the source has no define for it, so the one line
                           `MALLOC_RUNTIME_VAR PoisonType opt_poison = SOME;` is changed to NONE by sed, and
                           a grep step fails the build if that line was not there to change
Layout builds (one build of a library is one sample of its code layout): `<id>_l<N>` is the
build of `<id>` with layout N >= 2: the same objects, compiled with the same flags, linked in an order
permuted by the seed N and behind a pad of 16 x (N mod 256) bytes of .text (a separate object linked
first), so every function lands at another address and alignment while no instruction changes. Layout 1 is
the plain `<id>`, the link order of SOURCES with no pad.
Debian's patches for firefox-esr 140.12.0esr-1~deb12u1 touch none of the extracted paths. Debian builds
that package for bookworm with g++-11 (debian/rules); here the system's g++. Both inline SOME's bounded
memset (at most 256 bytes) as `rep stos`, while ALL's unbounded one calls libc's memset: on small blocks
the shipped poisoning can cost more than the full one.
Compilers: Mozilla builds Firefox for Linux with clang, so each of the three builds also comes as
`<id>-clang`, the same sources, defines and flags compiled and linked by Debian's clang++ (clang 14 in
bookworm; Mozilla's own toolchain is a newer clang, and a shipped Firefox adds PGO, LTO and links mozjemalloc
into its executable, none of which is here). gcc's builds keep their ids.
"""
import random
from dataclasses import dataclass, replace
from pathlib import Path


PACKAGE = "firefox-esr"
VERSION = "140.12.0esr-1~deb12u1"
# what the compiled files include, relative to the source's top directory; third_party/fmt and mfbt's
# double-conversion because mfbt/Casting.h includes fmt/format.h, which includes double-conversion
SOURCE_PATHS = ("memory/build", "mfbt", "mozglue/misc", "third_party/fmt")
SOURCES = ("memory/build/mozjemalloc.cpp", "memory/build/mozmemory_wrap.cpp", "memory/build/Mutex.cpp",
           "mfbt/Assertions.cpp", "mfbt/RandomNum.cpp", "mfbt/TaggedAnonymousMemory.cpp", "mozglue/misc/Printf.cpp",
           *(f"mfbt/double-conversion/double-conversion/{n}.cc"
             for n in ("bignum-dtoa", "bignum", "cached-powers", "double-to-string", "fast-dtoa", "fixed-dtoa")))
# what Firefox's build system would put in mozilla-config.h for a Linux release build of these files
CONFIG_DEFINES = ("MOZ_MEMORY 1", "XP_UNIX 1", "XP_LINUX 1")
# memory/build/moz.build: DEFINES["MOZ_MEMORY_IMPL"], LIBRARY_DEFINES["MOZ_HAS_MOZGLUE"]; the mfbt and mozglue
# files are compiled as mfbt's own (IMPL_MFBT), as in their moz.build
COMMON_FLAGS = ("-std=gnu++17", "-O2", "-fPIC", "-DNDEBUG", "-DMOZ_MEMORY_IMPL", "-DMOZ_HAS_MOZGLUE", "-DIMPL_MFBT")
# The build folder's name (a process id in it) would reach the library through __FILE__ in the release
# assertions' messages; mapped to ".", the same recipe gives the same bytes in any folder on any machine.
REPRODUCIBLE = "file-prefix-map=<build folder>=."
POISON_LINE = "MALLOC_RUNTIME_VAR PoisonType opt_poison = SOME;"
NO_POISON_LINE = "MALLOC_RUNTIME_VAR PoisonType opt_poison = NONE;"
POISON_BYTE = 0xE5  # memory/build/mozjemalloc.h: kAllocPoison
CHECK_SOURCE = Path(__file__).with_name("free_poison_check.c")


@dataclass(frozen=True)
class Config:
    library: str          # file name under <prefix>/lib
    defines: tuple        # extra -D flags
    poison_off: bool      # change opt_poison's initializer to NONE
    expected: str         # what the check prints for a freed 1024-byte block, before the malloc's object
    notes: str
    layout: int = 1       # 1: SOURCES' link order, no pad; N >= 2: order permuted by seed N, a pad object first
    compiler: str = "g++"  # the C++ compiler and linker driver: g++ or clang++


CONFIGS = {
    "mozjemalloc": Config("libmozjemalloc.so", (), True, "poison head 0/192 tail 0/512",
                          "mozjemalloc release build with opt_poison = NONE (our one-line change)"),
    "mozjemalloc-poison": Config("libmozjemalloc-poison.so", (), False, "poison head 192/192 tail 0/512",
                                 "mozjemalloc release build as Firefox ESR ships it: first 256 bytes poisoned"),
    "mozjemalloc-poison-full": Config("libmozjemalloc-poison-full.so", ("-DEARLY_BETA_OR_EARLIER",), False,
                                      "poison head 192/192 tail 512/512",
                                      "mozjemalloc with EARLY_BETA_OR_EARLIER: whole freed block poisoned"),
}


# the builds again with clang++ (Mozilla's compiler for Linux): "<id>-clang"
CLANG_BUILDS = ("mozjemalloc", "mozjemalloc-poison", "mozjemalloc-poison-full")
CONFIGS.update({f"{base}-clang": replace(CONFIGS[base], library=CONFIGS[base].library.replace(".so", "-clang.so"),
                                         compiler="clang++", notes=f"{CONFIGS[base].notes}; compiled by clang++")
                for base in CLANG_BUILDS})
COMPILER_PACKAGES = {"g++": ("g++", "gcc"), "clang++": ("clang", "gcc")}


def options(config_id: str) -> tuple:
    """What distinguishes the build, for BUILD.json and the catalogue's `build` claim."""
    c = CONFIGS[config_id]
    layout = (f"layout={c.layout}", "link-order=" + ",".join(_object_name(s) for s in link_order(c.layout)),
              f"text-pad={pad_bytes(c.layout)}") if c.layout > 1 else ()
    compiler = (f"cxx={c.compiler}",) if c.compiler != "g++" else ()
    return compiler + COMMON_FLAGS + c.defines + (("opt_poison=NONE",) if c.poison_off else ()) + (REPRODUCIBLE,) + layout


def link_order(layout: int) -> tuple:
    """SOURCES in the order their objects are linked: as listed for layout 1, else shuffled by the seed
    `layout` (a shuffle that happens to leave the order as it was is rotated by one)."""
    order = list(SOURCES)
    if layout > 1:
        random.Random(layout).shuffle(order)
        if order == list(SOURCES):
            order = order[1:] + order[:1]
    return tuple(order)


def pad_bytes(layout: int) -> int:
    return 0 if layout <= 1 else 16 * (layout % 256 or 1)


# every configuration of seed 002's primary cell in five layouts (1 is the plain build): enough builds to
# estimate the variance between layouts, not only to notice it
LAYOUTS = (2, 3, 4, 5)
LAYOUT_BUILDS = {f"{base}_l{n}": (base, n) for base in ("mozjemalloc", "mozjemalloc-poison") for n in LAYOUTS}
CONFIGS.update({lid: replace(CONFIGS[base], layout=n, notes=f"{CONFIGS[base].notes}; code layout {n} (link "
                             f"order permuted by seed {n}, {pad_bytes(n)} bytes of .text first)")
                for lid, (base, n) in LAYOUT_BUILDS.items()})


def _staged(prefix: Path, destdir: Path) -> Path:
    return Path(destdir) / Path(prefix).relative_to(Path(prefix).anchor)


def _object_name(source: str) -> str:
    return source.replace("/", "_").rsplit(".", 1)[0] + ".o"


def steps(config_id: str):
    c = CONFIGS[config_id]

    def make(src, build, prefix, destdir):
        src, build = Path(src), Path(build)
        staged = _staged(prefix, destdir)
        include = build / "include"
        config_header = build / "mozilla-config.h"
        commands = [
            (["mkdir", "-p", str(include / "mozilla"), str(staged / "lib"), str(staged / "bin")], src, {}),
            # Firefox exports mfbt's and mozglue's headers as <mozilla/*.h>
            (["sh", "-c", 'cp "$1"/mfbt/*.h "$1"/mozglue/misc/*.h "$2"', "sh", str(src), str(include / "mozilla")],
             src, {}),
            (["sh", "-c", 'for d; do echo "#define $d"; done > "$0"', str(config_header), *CONFIG_DEFINES],
             src, {}),
        ]
        jemalloc = src / "memory" / "build" / "mozjemalloc.cpp"
        if c.poison_off:
            commands += [
                (["sed", "-i", f"s/^{POISON_LINE}$/{NO_POISON_LINE}/", str(jemalloc)], src, {}),
                (["grep", "-qxF", NO_POISON_LINE, str(jemalloc)], src, {}),
            ]
        flags = [*COMMON_FLAGS, *c.defines, f"-ffile-prefix-map={src.parent}=.",
                 "-include", str(config_header), "-I", str(include),
                 "-I", str(src / "memory" / "build"), "-I", str(src / "third_party" / "fmt" / "include"),
                 "-I", str(src / "mfbt" / "double-conversion")]
        objects = []
        if pad_bytes(c.layout):
            pad = build / "layout_pad.o"
            objects.append(str(pad))
            commands.append((["sh", "-c", 'printf "%s\\n" "$1" | gcc -c -x assembler - -o "$0"', str(pad),
                              f".text\n.skip {pad_bytes(c.layout)}, 0x90"], src, {}))
        for source in link_order(c.layout):
            obj = build / _object_name(source)
            objects.append(str(obj))
            commands.append(([c.compiler, *flags, "-c", str(src / source), "-o", str(obj)], src, {}))
        commands += [
            ([c.compiler, "-shared", "-o", str(staged / "lib" / c.library), *objects, "-Wl,--no-undefined",
              "-lpthread"], src, {}),
            (["gcc", "-O0", "-Wno-use-after-free", "-o", str(staged / "bin" / "free-poison-check"),
              str(CHECK_SOURCE), "-ldl"], src, {}),
        ]
        return commands
    return make


def verify(config_id: str):
    def check(prefix):
        prefix = Path(prefix)
        return ([str(prefix / "bin" / "free-poison-check"), hex(POISON_BYTE)],
                {"LD_PRELOAD": str(prefix / "lib" / CONFIGS[config_id].library)})
    return check


def verified(config_id: str):
    """The check passes when malloc comes from this build's library and the freed block reads as expected."""
    c = CONFIGS[config_id]

    def judge(output: str) -> bool:
        return any(ln.startswith(c.expected + ", malloc from /") and ln.endswith("/lib/" + c.library)
                   for ln in output.splitlines())
    return judge


def outputs(config_id: str) -> tuple:
    return ("lib/" + CONFIGS[config_id].library, "bin/free-poison-check")
