"""Selected paths of a source package: the files apt lists, what is downloaded, one-pass extraction."""
import hashlib
import subprocess
from pathlib import Path

import pytest

from analysis.errors import HeapcostError
from analysis.harness.allocators import debsrc, debsrc_paths

PRINT_URIS = """\
Reading package lists...
NOTICE: 'pkg' packaging is maintained in the 'Git' version control system at:
Need to get 3 kB of source archives.
'http://mirror.example/pool/p/pkg/pkg_1.0-1%7edeb12u1.dsc' pkg_1.0-1~deb12u1.dsc 41 SHA256:aa
'http://mirror.example/pool/p/pkg/pkg_1.0.orig-l10n-fr.tar.bz2' pkg_1.0.orig-l10n-fr.tar.bz2 10 SHA256:bb
'http://mirror.example/pool/p/pkg/pkg_1.0.orig.tar.xz' pkg_1.0.orig.tar.xz 2000 SHA256:cc
'http://mirror.example/pool/p/pkg/pkg_1.0.orig.tar.xz.asc' pkg_1.0.orig.tar.xz.asc 833 SHA256:ee
'http://mirror.example/pool/p/pkg/pkg_1.0-1%7edeb12u1.debian.tar.xz' pkg_1.0-1~deb12u1.debian.tar.xz 9 SHA256:dd
"""


def test_print_uris_parsing_and_the_files_wanted():
    files = debsrc.parse_print_uris(PRINT_URIS)
    assert [f.name for f in files][0] == "pkg_1.0-1~deb12u1.dsc" and len(files) == 5
    assert files[2].size == 2000 and files[2].hash == "SHA256:cc"
    dsc, upstream, debian = debsrc_paths.wanted_files(files)
    assert (dsc.name, upstream.name, debian.name) == (
        "pkg_1.0-1~deb12u1.dsc", "pkg_1.0.orig.tar.xz", "pkg_1.0-1~deb12u1.debian.tar.xz")
    with pytest.raises(HeapcostError, match="one upstream tarball"):
        debsrc_paths.wanted_files([f for f in files if "orig.tar.xz" not in f.name or "asc" in f.name])


def test_apt_commands_list_and_download_with_the_listed_hash(tmp_path):
    calls = []

    def runner(argv, cwd=None, **kw):
        calls.append(argv)
        if "--print-uris" in argv:
            return subprocess.CompletedProcess(argv, 0, PRINT_URIS, "")
        if "download-file" in argv:
            Path(argv[-2]).write_text("x")
        return subprocess.CompletedProcess(argv, 0, "", "")

    apt = debsrc.AptSources(root=tmp_path / "apt", runner=runner, log=open(tmp_path / "log", "w"))
    (tmp_path / "apt" / "lists").mkdir(parents=True)
    (tmp_path / "apt" / "lists" / "x_Sources").write_text("")  # lists present: no apt-get update
    apt.write_sources = lambda: None
    files = apt.source_files("pkg", "1.0-1~deb12u1")
    assert calls[-1][:2] == ["apt-get", "-q"] and calls[-1][-3:] == ["source", "--print-uris", "pkg=1.0-1~deb12u1"]
    got = apt.download_file(files[2], tmp_path)
    assert got == tmp_path / "pkg_1.0.orig.tar.xz" and got.read_text() == "x"
    assert calls[-1][0] == debsrc.APT_HELPER
    assert calls[-1][-4:] == ["download-file", files[2].uri, str(got), "SHA256:cc"]
    assert "-o" in calls[-1]  # the private configuration, not the system's


def _tarball(path: Path, top: str, members: dict, dot=False):
    src = path.parent / f"src-{path.name}"
    for name, text in members.items():
        f = src / top / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    subprocess.run(["tar", "-C", str(src), "-cJf", str(path), "./" if dot else top], check=True)
    return path


class FakeApt:
    """Lists and 'downloads' local files, as AptSources would from a repository."""

    def __init__(self, files: dict):
        self.files, self.downloaded, self.log = files, [], None

    def source_files(self, package, version):
        return [debsrc.SourceFile("file://" + str(p), p.name, p.stat().st_size,
                                  "SHA256:" + hashlib.sha256(p.read_bytes()).hexdigest()) for p in self.files.values()]

    def download_file(self, f, dest):
        self.downloaded.append(f.name)
        (dest / f.name).write_bytes(self.files[f.name].read_bytes())
        return dest / f.name


@pytest.mark.parametrize("dot", [False, True])
def test_only_the_selected_paths_are_extracted_and_cached_by_version(tmp_path, dot):
    pool = tmp_path / "pool"
    pool.mkdir()
    upstream = _tarball(pool / "pkg_1.0.orig.tar.xz", "pkg-1.0", {
        "memory/build/a.cpp": "a", "memory/build/sub/b.h": "b", "mfbt/c.h": "c",
        "third_party/x/memory/no.h": "no", "dom/no.cpp": "no"}, dot=dot)
    debian = _tarball(pool / "pkg_1.0-1.debian.tar.xz", "debian", {"patches/series": "p.patch\n"})
    component = _tarball(pool / "pkg_1.0.orig-l10n-fr.tar.xz", "fr", {"x": "x"})
    dsc = pool / "pkg_1.0-1.dsc"
    dsc.write_text("dsc\n")
    apt = FakeApt({p.name: p for p in (dsc, upstream, debian, component)})
    root = tmp_path / "sources"
    tree = debsrc_paths.fetch_source_paths("pkg", "1:1.0-1", ["memory/build", "mfbt/"], apt=apt, root=root)
    assert sorted(apt.downloaded) == sorted([dsc.name, upstream.name, debian.name])  # not the component
    found = sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file())
    assert found == ["debian/patches/series", "memory/build/a.cpp", "memory/build/sub/b.h", "mfbt/c.h"]
    assert tree.parent.name.startswith("pkg-1_1.0-1-paths-")
    assert debsrc.version_of_tree(tree) == "1:1.0-1"
    assert not (tree.parent / "files").exists()  # the downloads are gone once extracted
    again = debsrc_paths.fetch_source_paths("pkg", "1:1.0-1", ["mfbt", "memory/build"], apt=apt, root=root)
    assert again == tree and len(apt.downloaded) == 3  # same paths, any order: reused
    assert debsrc_paths.cached_paths_tree("pkg", "1:1.0-1", ["mfbt"], root) != tree


def test_a_missing_path_or_a_bad_one_is_a_one_line_error(tmp_path):
    upstream = _tarball(tmp_path / "pkg_1.0.orig.tar.xz", "pkg-1.0", {"memory/a.c": "a"})
    with pytest.raises(HeapcostError, match=r"no pkg-1.0/nothere in it"):
        debsrc_paths.extract_paths(upstream, tmp_path / "out", ["memory", "nothere"])
    for bad in ["../etc", "*/memory", "", "./x"]:
        with pytest.raises(HeapcostError):
            debsrc_paths.check_paths([bad])
    with pytest.raises(HeapcostError, match="explicit source version"):
        debsrc_paths.fetch_source_paths("pkg", "", ["memory"], apt=FakeApt({}), root=tmp_path)


def test_the_extraction_reads_the_tarball_once_with_every_path():
    argv = debsrc_paths.extract_command(Path("t.tar.xz"), Path("d"), ["memory", "mfbt"], "./firefox-140.12.0")
    assert argv.count("-xf") == 1 and "--strip-components=2" in argv
    assert argv[-2:] == ["./firefox-140.12.0/memory", "./firefox-140.12.0/mfbt"]
