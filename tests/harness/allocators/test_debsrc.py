import random
import shutil
import subprocess
from pathlib import Path

import pytest

from analysis.harness.allocators import debsrc
from analysis.errors import HeapcostError

DEB822 = """\
Types: deb
# a comment line inside the paragraph
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
Enabled: no
URIs: http://disabled.example/debian
Suites: bookworm
Components: main
"""

ONE_LINE = """\
# comment
deb [arch=amd64 signed-by=/usr/share/keyrings/other.gpg] http://other.example/debian bookworm main non-free
deb http://plain.example/debian bookworm main   # trailing comment
deb-src http://plain.example/debian bookworm main
bogus line here
"""


def test_parse_deb822_keeps_fields_and_skips_disabled():
    entries = debsrc.parse_deb822(DEB822)
    assert [e.uris for e in entries] == [("http://mirror.example/debian",), ("http://mirror.example/debian-security",)]
    assert entries[0].suites == ("bookworm", "bookworm-updates")
    assert entries[0].components == ("main", "contrib")
    assert entries[0].signed_by == "/usr/share/keyrings/debian-archive-keyring.gpg"


def test_parse_one_line_reads_options_and_drops_binary_only_ones():
    entries = debsrc.parse_one_line(ONE_LINE)
    assert entries[0] == debsrc.SourceEntry(("http://other.example/debian",), ("bookworm",), ("main", "non-free"),
                                            "/usr/share/keyrings/other.gpg", ())
    # the deb and deb-src lines for one repository give the same entry
    assert entries[1] == entries[2] == debsrc.SourceEntry(("http://plain.example/debian",), ("bookworm",), ("main",))
    assert len(entries) == 3


def test_render_deb_src_round_trips_through_the_parser():
    entries = debsrc.parse_deb822(DEB822) + debsrc.parse_one_line(ONE_LINE)[:2]
    text = debsrc.render_deb_src(entries)
    assert text.count("Types: deb-src\n") == 4 and "Types: deb\n" not in text
    assert debsrc.parse_deb822(text) == entries


def _fake_etc(tmp_path: Path) -> Path:
    etc = tmp_path / "etc"
    (etc / "sources.list.d").mkdir(parents=True)
    (etc / "sources.list").write_text(ONE_LINE)
    (etc / "sources.list.d" / "debian.sources").write_text(DEB822)
    (etc / "sources.list.d" / "vendor.list.disabled").write_text("deb http://ignored.example/x stable main\n")
    (etc / "sources.list.d" / "dup.list").write_text("deb http://plain.example/debian bookworm main\n")
    return etc


def test_system_entries_reads_both_forms_once_and_ignores_other_suffixes(tmp_path):
    entries = debsrc.system_entries(_fake_etc(tmp_path))
    uris = [e.uris[0] for e in entries]
    assert uris == ["http://other.example/debian", "http://plain.example/debian",
                    "http://mirror.example/debian", "http://mirror.example/debian-security"]


def test_apt_accepts_the_written_sources_and_the_options_stay_private(tmp_path):
    if shutil.which("apt-get") is None:
        pytest.skip("apt-get is not on this machine")
    apt = debsrc.AptSources(root=tmp_path / "apt", etc=_fake_etc(tmp_path))
    apt.write_sources()
    opts = apt.options()
    assert all(str(tmp_path) in o or "/dev/null" in o or "Sandbox" in o for o in opts[1::2])
    proc = subprocess.run(["apt-get", *opts, "indextargets", "--no-release-info", "--format", "$(URI)"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    sources = sorted(u for u in proc.stdout.split() if u.endswith("/source/Sources"))
    assert sources == sorted([
        "http://mirror.example/debian-security/dists/bookworm-security/main/source/Sources",
        "http://mirror.example/debian/dists/bookworm-updates/contrib/source/Sources",
        "http://mirror.example/debian/dists/bookworm-updates/main/source/Sources",
        "http://mirror.example/debian/dists/bookworm/contrib/source/Sources",
        "http://mirror.example/debian/dists/bookworm/main/source/Sources",
        "http://other.example/debian/dists/bookworm/main/source/Sources",
        "http://other.example/debian/dists/bookworm/non-free/source/Sources",
        "http://plain.example/debian/dists/bookworm/main/source/Sources",
    ])
    assert not any("/binary-" in u for u in proc.stdout.split())


def test_compare_versions_agrees_with_dpkg():
    if shutil.which("dpkg") is None:
        pytest.skip("dpkg is not on this machine")
    pool = ["1.0", "1.0-1", "1.0-1+deb12u1", "1.0-1+deb12u10", "1.0-1+deb12u2", "1.0~rc1-1", "1.0+ds-2",
            "1:0.9", "2:0.1", "1.0a", "1.0.1", "1.00", "5.36.0-7+deb12u3", "5.36.0-7+deb12u4", "5.36.0-7",
            "2.0.9+ds-2", "2.0.10", "0~", "0", "1.0-1~bpo12+1", "a", "1.0-a", "1.0-0"]
    rng = random.Random(20240517)
    pairs = [(rng.choice(pool), rng.choice(pool)) for _ in range(60)]
    for a, b in pairs:
        expected = 0
        for op, value in (("lt", -1), ("gt", 1)):
            if subprocess.run(["dpkg", "--compare-versions", a, op, b]).returncode == 0:
                expected = value
        assert debsrc.compare_versions(a, b) == expected, (a, b)


def test_newest_first_and_showsrc_parsing():
    text = ("Package: perl\nVersion: 5.36.0-7+deb12u3\nFiles:\n abc 1 perl.dsc\n\n"
            "Package: perl\nVersion: 5.36.0-7+deb12u4\n\n"
            "Package: perl-other\nVersion: 9.9\n\nPackage: perl\nVersion: 5.36.0-7+deb12u3\n")
    assert debsrc.newest_first(debsrc.parse_showsrc(text, "perl")) == ["5.36.0-7+deb12u4", "5.36.0-7+deb12u3"]


class FakeApt:
    """Stands in for AptSources: `gone` versions are listed but 404 on download."""

    def __init__(self, versions, gone=()):
        self.versions, self.gone, self.downloads, self.log = versions, set(gone), [], None

    def source_versions(self, package):
        return debsrc.newest_first(self.versions)

    def download(self, package, version, dest):
        self.downloads.append(version)
        if version in self.gone:
            return False
        (dest / f"{package}_{version}.dsc").write_text("fake dsc\n")
        return True

    def extract(self, dsc, dest):
        dest.mkdir()
        (dest / "VERSION").write_text(dsc.name)


def test_fetch_falls_back_to_the_next_version_that_downloads_and_then_reuses_it(tmp_path):
    apt = FakeApt(["5.36.0-7+deb12u3", "5.36.0-7+deb12u4", "5.36.0-7"], gone={"5.36.0-7+deb12u4"})
    tree = debsrc.fetch_source("perl", apt=apt, root=tmp_path)
    assert apt.downloads == ["5.36.0-7+deb12u4", "5.36.0-7+deb12u3"]
    assert tree == tmp_path / "perl-5.36.0-7+deb12u3" / "tree"
    assert (tree / "VERSION").read_text() == "perl_5.36.0-7+deb12u3.dsc"
    assert debsrc.version_of_tree(tree) == "5.36.0-7+deb12u3"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp")] == []
    # a second call reuses the cached tree without downloading anything again
    assert debsrc.fetch_source("perl", apt=apt, root=tmp_path) == tree
    assert debsrc.fetch_source("perl", "5.36.0-7+deb12u3", apt=apt, root=tmp_path) == tree
    assert len(apt.downloads) == 3  # the gone one is retried (it may come back), the cached one is not


def test_fetch_explicit_version_and_total_failure(tmp_path):
    apt = FakeApt(["1:2.0-1", "1:1.0-1"], gone={"1:2.0-1", "1:1.0-1"})
    with pytest.raises(HeapcostError, match=r"tried 1:2.0-1, 1:1.0-1"):
        debsrc.fetch_source("pkg", apt=apt, root=tmp_path)
    assert not any(p.name.startswith("pkg-") for p in tmp_path.iterdir())
    apt.gone = set()
    tree = debsrc.fetch_source("pkg", "1:1.0-1", apt=apt, root=tmp_path)
    assert tree.parent.name == "pkg-1_1.0-1" and apt.downloads[-1] == "1:1.0-1"
    assert debsrc.version_of_tree(tree) == "1:1.0-1"


def test_an_interrupted_fetch_is_not_taken_for_a_cached_one(tmp_path):
    half = tmp_path / "perl-1.0-1" / "tree"
    half.mkdir(parents=True)  # no completion mark: e.g. killed during extraction
    apt = FakeApt(["1.0-1"])
    tree = debsrc.fetch_source("perl", apt=apt, root=tmp_path)
    assert apt.downloads == ["1.0-1"] and (tree / "VERSION").is_file()


def test_no_sources_at_all_is_a_user_error(tmp_path):
    (tmp_path / "etc").mkdir()
    apt = debsrc.AptSources(root=tmp_path / "apt", etc=tmp_path / "etc")
    with pytest.raises(HeapcostError, match="no apt repositories"):
        apt.write_sources()
