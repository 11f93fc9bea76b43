"""The security score's weights (security_weights.toml at the repository's root): the attacker capability each
probe and each exploitation-primitive cell gives, the capability's weight with its reason, and how much of a
capability each probe outcome leaves the attacker. A malformed file is a one-line error naming the problem."""
from dataclasses import dataclass
from pathlib import Path

from analysis.errors import HeapcostError, read_toml
from analysis.paths import REPO

WEIGHTS_TOML = REPO / "security_weights.toml"
CAPABILITIES = ("arbitrary-write", "chosen-address", "overlapping-chunks", "restricted-write", "information-leak")
OUTCOMES = ("missed", "late-crash", "mitigated", "caught")
PRIMITIVE_PREFIX = "primitive:"  # a primitive cell's entry id: primitive:<bug class>/<primitive>


@dataclass(frozen=True)
class Entry:
    id: str  # the probe's id, or primitive:<bug class>/<primitive>
    capability: str
    weight: float
    reason: str
    bug_class: str = ""  # primitive cells only
    primitive: str = ""

    @property
    def is_primitive(self) -> bool:
        return bool(self.primitive)


@dataclass(frozen=True)
class Weights:
    capabilities: dict  # {capability: (weight, reason)}
    losses: dict  # {outcome: (loss, reason)}
    entries: tuple  # Entry, probes first, in the file's order

    def weights(self) -> dict[str, float]:
        """{entry id: weight}: what analysis.stats.security scores with."""
        return {e.id: e.weight for e in self.entries}

    def capability_of(self) -> dict[str, str]:
        return {e.id: e.capability for e in self.entries}

    def loss(self, outcome: str) -> float:
        return self.losses[outcome][0]


def primitive_id(bug_class: str, primitive: str) -> str:
    return f"{PRIMITIVE_PREFIX}{bug_class}/{primitive}"


def _reason(table, where: str) -> str:
    reason = table.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise HeapcostError(f"{where}: a one-line reason is required")
    if "\n" in reason:
        raise HeapcostError(f"{where}: the reason must be one line")
    return reason.strip()


def _number(table, key: str, where: str, low: float, high: float) -> float:
    value = table.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise HeapcostError(f"{where}: {key} must be a number in [{low:g}, {high:g}], not {value!r}")
    return float(value)


def _keys(table, allowed: set, where: str) -> None:
    if not isinstance(table, dict):
        raise HeapcostError(f"{where}: a table expected")
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise HeapcostError(f"{where}: unknown key {', '.join(unknown)}")


def _named_table(data: dict, table: str, names, key: str, most: float, name: str) -> dict:
    """{name: (value, reason)} of a [table.<name>] section that must name exactly `names`, each with its `key`
    (a number from 0 to `most`) and a reason."""
    section = data.get(table) or {}
    if not isinstance(section, dict) or sorted(section) != sorted(names):
        raise HeapcostError(f"{name}: [{table}.*] must name exactly {', '.join(names)}")
    out = {}
    for entry in names:
        where = f"{name} {table} {entry}"
        _keys(section[entry], {key, "reason"}, where)
        out[entry] = (_number(section[entry], key, where, 0.0, most), _reason(section[entry], where))
    return out


def parse(data: dict, name: str = "security_weights.toml", probes=None, primitive_cells=None) -> Weights:
    """The weights from a parsed file. `probes` (ids) and `primitive_cells` ((bug class, primitive) pairs), when
    given, must each have exactly one entry."""
    _keys(data, {"capability", "outcome", "probe", "primitive"}, name)
    capabilities = _named_table(data, "capability", CAPABILITIES, "weight", 100.0, name)
    losses = _named_table(data, "outcome", OUTCOMES, "loss", 1.0, name)
    if losses["missed"][0] != 1.0 or losses["caught"][0] != 0.0:
        raise HeapcostError(f"{name}: a missed outcome loses 1 and a caught one 0; the other losses lie between")
    entries, seen = [], set()
    for kind in ("probe", "primitive"):
        tables = data.get(kind) or []
        if not isinstance(tables, list):
            raise HeapcostError(f"{name}: [[{kind}]] entries expected")
        for i, table in enumerate(tables):
            where = f"{name} {kind} #{i + 1}"
            keys = {"id"} if kind == "probe" else {"bug_class", "primitive"}
            _keys(table, keys | {"capability", "weight", "reason"}, where)
            missing = sorted(k for k in keys | {"capability", "weight"} if k not in table)
            if missing:
                raise HeapcostError(f"{where}: missing {', '.join(missing)}")
            ident = table["id"] if kind == "probe" else primitive_id(table["bug_class"], table["primitive"])
            where = f"{name} {kind} {ident}"
            cap = table["capability"]
            if cap not in capabilities:
                raise HeapcostError(f"{where}: capability {cap!r} is not one of {', '.join(CAPABILITIES)}")
            weight = _number(table, "weight", where, 0.0, 100.0)
            if weight != capabilities[cap][0]:
                raise HeapcostError(f"{where}: weight {weight:g} differs from its capability {cap}'s "
                                    f"{capabilities[cap][0]:g} (weights follow the capability)")
            if ident in seen:
                raise HeapcostError(f"{where}: appears twice")
            seen.add(ident)
            entries.append(Entry(ident, cap, weight, _reason(table, where),
                                 *((table["bug_class"], table["primitive"]) if kind == "primitive" else ())))
    if probes is not None:
        named = {e.id for e in entries if not e.is_primitive}
        absent, unknown = sorted(set(probes) - named), sorted(named - set(probes))
        if absent or unknown:
            raise HeapcostError(f"{name}: " + "; ".join(
                ([f"no entry for probe {', '.join(absent)}"] if absent else [])
                + ([f"no probe named {', '.join(unknown)}"] if unknown else [])))
    if primitive_cells is not None:
        named = {(e.bug_class, e.primitive) for e in entries if e.is_primitive}
        bad = sorted(named - set(primitive_cells))
        if bad:
            raise HeapcostError(f"{name}: no primitive cell {', '.join('/'.join(c) for c in bad)}")
    return Weights(capabilities, losses, tuple(entries))


def load(path: Path | None = None, probes=None, primitive_cells=None) -> Weights:
    """The weights file (WEIGHTS_TOML unless given), validated (parse)."""
    path = Path(WEIGHTS_TOML if path is None else path)
    if not path.is_file():
        raise HeapcostError(f"{path.name}: the security weights file does not exist")
    return parse(read_toml(path), path.name, probes, primitive_cells)
