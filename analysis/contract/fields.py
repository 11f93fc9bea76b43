"""One column of a Table Schema (frictionless): the helper every table of the contract is written with."""


def field(name, type_, description, unit=None, **constraints) -> dict:
    """A Table Schema field: its name, type and meaning, its unit when it has one, and its constraints."""
    out = {"name": name, "type": type_, "description": description}
    if unit:
        out["unit"] = unit
    if constraints:
        out["constraints"] = constraints
    return out
