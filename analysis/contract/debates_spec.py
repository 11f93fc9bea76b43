"""The pre-registered questions of the debates (debates.toml at the repository's root): what each debate
compares, on which workloads, with which margin and decision rule, its primary cell (the one pair and workload
that answers it first; the others are secondary), when and in which commit it was registered, and every
amendment since with what it replaced. A malformed file is a one-line error."""
import re
from dataclasses import dataclass
from pathlib import Path

from analysis.errors import HeapcostError, read_toml
from analysis.paths import REPO

DEBATES_TOML = REPO / "debates.toml"
RULES = ("cost_at_most", "equivalent")
QUANTITIES = ("wall_s",)
REQUIRED = ("seed", "question", "contested", "workloads", "quantity", "margin", "margin_reason", "rule", "primary",
            "registered")
OPTIONAL = ("every_pair", "amendments")
# "2026-12-01, commit 9b395ec": the date and the commit a question was registered or amended in
_DATED = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}, commit [0-9a-f]{7,40}")
_AMENDMENT = re.compile(_DATED.pattern + r": \S.*", re.DOTALL)


@dataclass(frozen=True)
class Question:
    seed: str
    question: str
    contested: tuple  # ((with the defence, without it), ...)
    workloads: tuple
    quantity: str
    margin: float  # a fraction: 0.025 is 2.5%
    margin_reason: str
    rule: str
    every_pair: bool = False
    primary: tuple = ()  # ((with, without), workload): the cell that answers the debate first
    registered: str = ""  # "<date>, commit <hash>"
    amendments: tuple = ()  # ("<date>: what changed and what it replaced", ...)

    def is_primary(self, with_: str, without: str, workload: str) -> bool:
        return bool(self.primary) and self.primary == ((with_, without), workload)


def _question(entry, where: str) -> Question:
    if not isinstance(entry, dict):
        raise HeapcostError(f"{where}: a [[debate]] table expected")
    missing = [k for k in REQUIRED if k not in entry]
    if missing:
        raise HeapcostError(f"{where}: missing {', '.join(missing)}")
    unknown = sorted(set(entry) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise HeapcostError(f"{where}: unknown key {', '.join(unknown)}")
    pairs = entry["contested"]
    if (not isinstance(pairs, list) or not pairs
            or not all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) and x for x in p)
                       and p[0] != p[1] for p in pairs)):
        raise HeapcostError(f"{where}: contested must be a list of [with, without] pairs of two different names")
    workloads = entry["workloads"]
    if not isinstance(workloads, list) or not workloads or not all(isinstance(w, str) and w for w in workloads):
        raise HeapcostError(f"{where}: workloads must be a non-empty list of names")
    margin = entry["margin"]
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 < margin < 1:
        raise HeapcostError(f"{where}: margin must be a fraction between 0 and 1 (0.025 for 2.5%), not {margin!r}")
    if entry["rule"] not in RULES:
        raise HeapcostError(f"{where}: rule {entry['rule']!r} is none of {', '.join(RULES)}")
    if entry["quantity"] not in QUANTITIES:
        raise HeapcostError(f"{where}: quantity {entry['quantity']!r} is none of {', '.join(QUANTITIES)}")
    for key in ("seed", "question", "margin_reason"):
        if not isinstance(entry[key], str) or not entry[key].strip():
            raise HeapcostError(f"{where}: {key} must be a non-empty string")
    if not isinstance(entry.get("every_pair", False), bool):
        raise HeapcostError(f"{where}: every_pair must be true or false")
    primary = entry["primary"]
    if (not isinstance(primary, dict) or set(primary) != {"pair", "workload"}
            or not isinstance(primary["pair"], list) or primary["pair"] not in pairs
            or primary["workload"] not in workloads):
        raise HeapcostError(f"{where}: primary must be {{ pair = [with, without], workload = name }} naming one of "
                            "its contested pairs and one of its workloads")
    if not isinstance(entry["registered"], str) or not _DATED.fullmatch(entry["registered"]):
        raise HeapcostError(f"{where}: registered must say the date and the commit it was registered in "
                            "(\"YYYY-MM-DD, commit <hash>\")")
    amendments = entry.get("amendments", [])
    if not isinstance(amendments, list) or not all(isinstance(a, str) and _AMENDMENT.fullmatch(a) for a in amendments):
        raise HeapcostError(f"{where}: amendments must be a list of sentences \"YYYY-MM-DD, commit <hash>: what "
                            "changed, what it replaced\"")
    return Question(entry["seed"], entry["question"], tuple(tuple(p) for p in pairs), tuple(workloads),
                    entry["quantity"], float(margin), entry["margin_reason"], entry["rule"],
                    bool(entry.get("every_pair", False)), (tuple(primary["pair"]), primary["workload"]),
                    entry["registered"], tuple(amendments))


def load(path: Path = DEBATES_TOML) -> dict[str, Question]:
    """seed -> its pre-registered question."""
    path = Path(path)
    if not path.is_file():
        raise HeapcostError(f"{path.name}: not found (the debates' pre-registered questions)")
    doc = read_toml(path)
    entries = doc.get("debate")
    if not isinstance(entries, list) or not entries:
        raise HeapcostError(f"{path.name}: no [[debate]] tables")
    out = {}
    for i, entry in enumerate(entries):
        q = _question(entry, f"{path.name}: debate {i + 1}")
        if q.seed in out:
            raise HeapcostError(f"{path.name}: seed {q.seed} is registered twice")
        out[q.seed] = q
    return out


TIMELINE_COLUMNS = ["date", "commit", "event", "seeds", "what"]


def timeline(questions: dict[str, Question]) -> list[dict]:
    """Every registration and amendment once, the earliest first: its date and commit, whether it registered or
    amended, the seeds it touched (one amendment made to several debates in one commit is one row) and what it
    changed (the amendment's sentence after its date and commit)."""
    events: dict[tuple, dict] = {}
    for seed, q in sorted(questions.items()):
        entries = [("registered", q.registered, "the question, its pairs, workloads, margin and rule")]
        entries += [("amended", a.split(": ", 1)[0], a.split(": ", 1)[1]) for a in q.amendments]
        for event, dated, what in entries:
            date, commit = dated.split(", commit ")
            key = (date, commit, event, what)
            events.setdefault(key, {"date": date, "commit": commit, "event": event, "seeds": [], "what": what})
            events[key]["seeds"].append(seed)
    rows = sorted(events.values(), key=lambda r: (r["date"], r["event"] != "registered", r["commit"], r["seeds"]))
    return [{**r, "seeds": ", ".join(r["seeds"])} for r in rows]
