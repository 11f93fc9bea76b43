"""Randomized complete blocks with adaptive extension: the loop every timed campaign runs, whatever one
measurement is (a trial, or a lockstep pair of processes).

Every cell runs once per block, in a fresh random order per block; block 0.. warmups-1 are warm-up. The
random draws a measurement needs (environment offsets) are made for every position in the order, measured
or already done, so a resumed campaign draws exactly what an uninterrupted one would. With a target, more
blocks follow for the cells whose interval is still wider, decided from the rows before that point only.
"""
import random
import time

from analysis.errors import HeapcostError


def plan(cells, blocks: int, warmups: int, seed: int, first_block: int = 0) -> list[tuple]:
    """(block, warm-up?, *cell) for every cell once per block, in a fresh random order each block."""
    rng = random.Random(seed)
    out = []
    for b in range(first_block, first_block + blocks):
        order = list(cells)
        rng.shuffle(order)
        out += [(b, b < warmups, *cell) for cell in order]
    return out


def run_blocks(cells, *, blocks: int, warmups: int, seed: int, salt: int, done: list[dict], draw, measure,
               record, bar, target: float | None = None, wider=None, budget_min: float | None = None,
               elapsed_s: float = 0.0) -> dict:
    """Run the campaign's blocks; returns the note for run.json (why it stopped, when it did).

    draw(rng) -> the random values one measurement needs; measure(block, warm, cell, values, done) -> the
    row; record(row) appends it (the caller's table); wider(rows, target) -> the cells to extend."""
    done_seqs = {int(r["seq"]) for r in done}
    queue = plan(cells, blocks + warmups, warmups, seed)
    rng = random.Random(seed ^ salt)
    started = time.monotonic() - elapsed_s
    budget_s = budget_min * 60 if budget_min else None
    seq, next_block = 0, blocks + warmups
    while True:
        for block, warm, *cell in queue:
            values = draw(rng)
            if seq in done_seqs:
                seq += 1
                continue
            if budget_s and time.monotonic() - started > budget_s:
                return {"stopped": f"budget of {budget_min:g} min spent"}
            row = measure(block, warm, tuple(cell), values, done)
            row.update(seq=seq, block=block, warmup=int(warm))
            record(row)
            done.append({k: "" if v is None else str(v) for k, v in row.items()})
            seq += 1
            bar.update(1)
        if not target:
            return {}
        wide = wider([r for r in done if int(r["seq"]) < seq], target)
        if not wide:
            return {"adaptive": f"every pair within ±{target:g}"}
        queue = plan(wide, 1, 0, seed + next_block, first_block=next_block)
        next_block += 1
        bar.total += len(queue)
        bar.refresh()


def parse_seed(value) -> int:
    """SEED: the blocks' random orders and draws, a non-negative integer."""
    try:
        seed = int(value)
    except (TypeError, ValueError):
        seed = -1
    if seed < 0:
        raise HeapcostError(f"SEED must be a non-negative integer, not {value!r}")
    return seed
