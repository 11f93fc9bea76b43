"""Which role each catalogue configuration plays on the security axis (allocators.toml): deployable (a project
ships it), debugging (too slow to be anyone's default), knock-out (one defence removed from its control), control
(built here only as the knock-outs' control) or rebuild (built here to stand in for another, seed 003's second
port), and where its settings differ from what its project ships."""


def catalogue_roles() -> dict[str, str]:
    """Each catalogue allocator's role: knock-out (a defence removed from its control, knock_out_of), control (a
    build made here only as the knock-outs' control, not_shipped, with knock-outs naming it or its source), rebuild
    (not_shipped, and no knock-out's control: a build made here to stand in for another), debugging (`debugging` in
    allocators.toml says why: a debugging aid its project documents for finding bugs; or run at a reduced scale,
    scale < 1, too slow to be anyone's default) or deployable. An allocator the catalogue lacks is deployable."""
    from analysis.harness.allocators.catalog import layout_of, load_catalog

    catalog = load_catalog()
    controls = {a.knock_out_of for a in catalog.values() if a.knock_out_of}
    out = {}
    for a in catalog.values():
        shipped_as = ("control" if layout_of(a.id)[0] in controls or a.id in controls else "rebuild")
        out[a.id] = ("knock-out" if a.knock_out_of else shipped_as if a.not_shipped
                     else "debugging" if a.debugging or a.scale < 1 else "deployable")
    return out


def catalogue_debugging() -> set[str]:
    """The catalogue's debugging allocators (catalogue_roles)."""
    return {a for a, role in catalogue_roles().items() if role == "debugging"}


def catalogue_settings() -> list[dict]:
    """Each catalogue configuration's settings (its environment) and, where they differ from what its project
    ships, why; and for a knock-out, its control."""
    from analysis.harness.allocators.catalog import load_catalog

    return [{"allocator": a.id, "settings": " ".join(f"{k}={v}" for k, v in a.env.items()) or "as shipped",
             "why": a.settings_reason or a.not_shipped or (f"knock-out of {a.knock_out_of}" if a.knock_out_of else ""),
             "knock_out_of": a.knock_out_of} for a in load_catalog().values()]
