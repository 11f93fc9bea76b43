"""security_weights.toml: every probe and primitive cell mapped to a capability with its weight and reason, and a
malformed file refused with a one-line error."""
import subprocess
import sys
import tomllib

import pytest

from analysis.contract import security_weights as W
from analysis.errors import HeapcostError
from analysis.harness.security.probes import PROBES
from analysis.paths import REPO
from analysis.stats import primitives as PR


def published() -> dict:
    return tomllib.loads(W.WEIGHTS_TOML.read_text())


def test_the_published_file_covers_every_probe_and_names_only_real_primitive_cells():
    probes = [p for p, probe in PROBES.items() if probe.kind != "primitives" and probe.scored]
    cells = [(b, p) for b in PR.BUG_CLASSES[:-1] for p in PR.PRIMITIVES]
    weights = W.load(probes=probes, primitive_cells=cells)
    assert {e.id for e in weights.entries if not e.is_primitive} == set(probes)
    for e in weights.entries:
        assert e.weight == weights.capabilities[e.capability][0] and e.reason
    # the strongest capability outweighs every other, a leak weighs least
    ranked = sorted(weights.capabilities, key=lambda c: -weights.capabilities[c][0])
    assert ranked[0] == "arbitrary-write" and ranked[-1] == "information-leak"
    assert weights.loss("caught") < weights.loss("mitigated") < weights.loss("late-crash") < weights.loss("missed")


@pytest.mark.parametrize("edit, says", [
    (lambda d: d["probe"][0].__setitem__("weight", 7), "differs from its capability"),
    (lambda d: d["probe"][0].__setitem__("capability", "code-execution"), "is not one of"),
    (lambda d: d["probe"][0].pop("reason"), "reason is required"),
    (lambda d: d["probe"][0].__setitem__("reason", "two\nlines"), "one line"),
    (lambda d: d["probe"].append(dict(d["probe"][0])), "appears twice"),
    (lambda d: d["capability"].pop("information-leak"), "must name exactly"),
    (lambda d: d["outcome"]["mitigated"].__setitem__("loss", 1.5), "must be a number in [0, 1]"),
    (lambda d: d["outcome"]["caught"].__setitem__("loss", 0.1), "a missed outcome loses 1"),
    (lambda d: d["primitive"][0].pop("bug_class"), "missing bug_class"),
    (lambda d: d.__setitem__("extra", 1), "unknown key extra"),
])
def test_a_malformed_file_is_refused_with_a_line_naming_the_problem(edit, says):
    data = published()
    edit(data)
    with pytest.raises(HeapcostError) as exc:
        W.parse(data)
    assert says in str(exc.value) and "\n" not in str(exc.value)


def test_a_probe_without_an_entry_or_an_entry_without_a_probe_is_refused():
    data = published()
    data["probe"] = data["probe"][1:]
    with pytest.raises(HeapcostError, match="no entry for probe freelist-poison"):
        W.parse(data, probes=[e["id"] for e in published()["probe"]])
    with pytest.raises(HeapcostError, match="no probe named double-free"):
        W.parse(published(), probes=[e["id"] for e in published()["probe"] if e["id"] != "double-free"])
    with pytest.raises(HeapcostError, match="no primitive cell double-free/allocator-write"):
        W.parse(published(), primitive_cells=[("double-free", "overlap")])


def test_a_missing_or_broken_file_is_one_line(tmp_path):
    with pytest.raises(HeapcostError, match="does not exist"):
        W.load(tmp_path / "nothing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[capability\n")
    with pytest.raises(HeapcostError, match="not valid TOML"):
        W.load(bad)


def test_the_cli_reports_a_broken_weights_file_in_one_line(tmp_path, monkeypatch):
    """The score reads the file on first use, inside the command: a broken file is the CLI's one-line error."""
    code = ("import sys; from analysis.contract import security_weights as W; from pathlib import Path; "
            f"W.WEIGHTS_TOML = Path({str(tmp_path / 'w.toml')!r}); "
            "from analysis.stats import security as S; "
            "from analysis.errors import HeapcostError\n"
            "try:\n    S.scores([])\nexcept HeapcostError as e:\n    print('error:', e); sys.exit(2)")
    (tmp_path / "w.toml").write_text("[capability.arbitrary-write]\nweight = 10\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout.count("\n") == 1 and "must name exactly" in done.stdout
