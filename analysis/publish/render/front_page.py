"""The paper's first page: the five debates' answers and the trade-off's headline, read from the products the
debates and the trade-off already wrote (results_debates.csv, results_debate_hosts.csv, results_tradeoff.csv).

results_front.csv holds one row per debate's registered primary cell: the pair measured, the workload, where
it was measured (each processor kind with its machines' names), the answer on each host, the verdict across
hosts and whether the answer carries to the setting the debate was about. A host is named as everywhere else
in the paper: its processor kind's one label and its machines' short names (analysis/contract/host.py). The abstract's sentences are built from the same rows, so an answer added later
fills the first page without new prose."""
from pathlib import Path

import pandas as pd

from analysis.publish.render.products import write_csv

FRONT_COLUMNS = ["seed", "debate", "pair", "workload", "where", "per_host", "verdict", "transfers", "sentence"]

# What a row measured here says about the system the debate was about, by the contested configuration's name
# (its prefix): the debated setting and this package's differ where the machine cannot run the debated one.
TRANSFERS = (
    ("perl-omalloc", "no: OpenBSD's malloc on Linux through a compatibility layer of ours, not perl on OpenBSD; "
                     "large blocks depend on the kernel's mmap"),
    ("hardened-", "in part: the seed's hardened_malloc commit preloaded as the seed did, on a re-created build, "
                  "not the kernel package build"),
    ("mozjemalloc", "in part: Firefox ESR's mozjemalloc as a release build with gcc (clang builds, as Mozilla's, "
                    "and the seed's whole-block poisoning are secondary cells), on a re-created DOM workload, not "
                    "Speedometer"),
    ("omalloc-1.128", "in part: OpenBSD's 1.128 on Linux through a compatibility layer of ours, each side in "
                      "layout builds; the patch also narrows the page-cache scan, measured apart as secondary cells"),
    ("glibc-built", "in part: glibc built here with and without glibc 2.29's tcache double-free key (the tcache "
                    "check glibc adopted; the seed's 2018 patch is not in its thread), on a re-creation of the "
                    "seed's loop"),
)


def transfer_note(configuration: str) -> str:
    with_side = configuration.split(" / ")[0].strip()
    for prefix, note in TRANSFERS:
        if with_side.startswith(prefix):
            return note
    return ""


def kind_machines(rows: pd.DataFrame) -> dict[str, list[str]]:
    """{processor kind's label: the names of its machines behind the answers} for rows of
    results_debate_hosts.csv (`processor`, and `machines` the "; "-joined machine names)."""
    out: dict[str, set] = {}
    for _, r in rows.iterrows():
        out.setdefault(str(r["processor"]), set()).update(m for m in str(r["machines"]).split("; ") if m)
    return {kind: sorted(names) for kind, names in sorted(out.items())}


def _machines(rows: pd.DataFrame) -> str:
    """The machines behind the answers, by kind: 'AMD EPYC 2600 MHz (25/17/1): K-1a2b3c, M-4d5e6f; ...'."""
    return "; ".join(f"{kind}: {', '.join(names)}" for kind, names in kind_machines(rows).items())


def primary_cells(debates: pd.DataFrame) -> pd.DataFrame:
    """Each debate's registered primary cell, by seed (none where the table has no cells)."""
    if debates.empty or "cell" not in debates:
        return debates.iloc[0:0]
    return debates[debates["cell"].astype(str) == "primary"].sort_values("seed")


def cell_hosts(hosts: pd.DataFrame, cell) -> pd.DataFrame:
    """The rows of results_debate_hosts.csv that answer one debate cell (seed, configuration, workload)."""
    if not len(hosts):
        return hosts
    return hosts[(hosts["seed"].astype(str) == str(cell["seed"])) & (hosts["configuration"] == cell["configuration"])
                 & (hosts["workload"] == cell["workload"])]


def front_machines(debates: pd.DataFrame, hosts: pd.DataFrame) -> str:
    """Every kind behind the first page's answers with its machines, each kind once."""
    mine = [cell_hosts(hosts, r) for _, r in primary_cells(debates).iterrows()]
    mine = [m for m in mine if len(m)]
    return _machines(pd.concat(mine)) if mine else ""


def front_rows(debates: pd.DataFrame, hosts: pd.DataFrame) -> pd.DataFrame:
    """One row per debate's primary cell (a debate without one is left out). Hosts are named by their processor
    kind's label as given (analysis.contract.host.processor_label), machines by their names."""
    out = []
    for _, r in primary_cells(debates).iterrows():
        mine = cell_hosts(hosts, r).sort_values("processor") if len(hosts) else hosts
        per_host = [f"{h['processor']}: {h['display']} ({h['decision_words']})" for _, h in mine.iterrows()]
        verdict = str(r["verdict"])
        with_side, _, without = str(r["configuration"]).partition(" / ")
        topic = str(r["topic"]).split(":")[0]
        if per_host:
            shown = [f"{h['display']} on {h['processor']}" for _, h in mine.iterrows()]
            answers = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
            sentence = (f"{topic}: the time with {with_side} over {without} on {r['workload']} is {answers}; "
                        f"against a margin of {r['margin']}, {verdict}.")
        else:
            sentence = f"{topic}: not measured here ({r.get('not_measured', '') or 'no run measured both sides'})."
        out.append({"seed": str(r["seed"]), "debate": topic, "pair": str(r["configuration"]),
                    "workload": str(r["workload"]), "where": _machines(mine) if len(mine) else "",
                    "per_host": "; ".join(per_host) or "not measured", "verdict": verdict,
                    "transfers": transfer_note(str(r["configuration"])), "sentence": sentence})
    return pd.DataFrame(out, columns=FRONT_COLUMNS)


def tradeoff_headline(trade: pd.DataFrame, baseline: str, reduced=()) -> str:
    """One sentence: how many configurations, which lie on the Pareto front, which are safer at no cost, and
    what the front's safest members cost (a ratio from a run at reduced scale named as such)."""
    def at_scale(allocator: str) -> str:
        return ", at reduced scale" if allocator in set(reduced) else ""

    if trade.empty:
        return ""
    front = trade[trade["pareto"].astype(str) == "True"]
    better = trade[trade["verdict"].astype(str).str.startswith("a better default")]
    buys = front[front["verdict"].astype(str).str.startswith("buys security")]
    text = (f"Of {len(trade)} configurations weighed by security score against time, {len(front)} lie on the "
            f"Pareto front; ")
    if len(better):
        text += f"{', '.join(better['allocator'])} {'is' if len(better) == 1 else 'are'} safer than {baseline} " \
                "at no measured cost"
    else:
        text += f"none is safer than {baseline} without costing time"
    if len(buys):
        dearest = buys.loc[buys["score"].astype(float).idxmax()]
        cheapest = buys.loc[buys["overhead"].astype(float).idxmin()]
        text += (f", and along the front security is bought with time: from {cheapest['allocator']} "
                 f"(time ratio {cheapest['overhead_display']}{at_scale(cheapest['allocator'])}, score "
                 f"{cheapest['score_display']}) to {dearest['allocator']} ({dearest['overhead_display']}"
                 f"{at_scale(dearest['allocator'])}, score {dearest['score_display']})")
    return text + "."


def write_front(p, baseline: str, reduced=()) -> dict:
    """results_front.csv from the debates' and the trade-off's products (read through `p`, name -> path);
    returns the numbers for results_numbers.json."""
    def table(name: str) -> pd.DataFrame:
        path = Path(p(name))
        return (pd.read_csv(path, dtype=str, keep_default_na=False) if path.is_file() and path.stat().st_size
                else pd.DataFrame())

    debates, hosts = table("debates.csv"), table("debate_hosts.csv")
    rows = front_rows(debates, hosts)
    write_csv(rows, p("front.csv"))
    return {"front": {"answers": int(len(rows)), "sentences": list(rows["sentence"]),
                      "machines": front_machines(debates, hosts),
                      "tradeoff": tradeoff_headline(table("tradeoff.csv"), baseline, reduced)}}
