"""Each catalogue configuration's role on the security axis, read from allocators.toml."""
from analysis.harness.allocators.catalog import load_catalog
from analysis.publish.security import roles


def test_glibcs_debugging_settings_are_debugging_configurations_with_their_reason():
    role = roles.catalogue_roles()
    catalog = load_catalog()
    for name in ("glibc-perturb", "glibc-debug"):
        assert role[name] == "debugging" and "debugging" in catalog[name].debugging, name
    assert role["glibc"] == "deployable" and role["glibc-no-tcache-key"] != "debugging"
    # every debugging configuration says why: a reason given, or a reduced scale
    for name, r in role.items():
        if r == "debugging":
            assert catalog[name].debugging or catalog[name].scale < 1, name
    assert {"glibc-perturb", "glibc-debug"} <= roles.catalogue_debugging()


def test_a_build_made_to_stand_in_for_another_is_a_rebuild_not_a_knock_outs_control():
    role = roles.catalogue_roles()
    assert role["glibc-built"] == role["glibc-built_l2"] == "control"  # knock-outs name it (or its source)
    assert role["glibc-no-tcache-key"] == "knock-out" and role["glibc"] == "deployable"
    assert role["omalloc-1.128-port2"] == role["omalloc-1.128-getrbyte-port2"] == "rebuild"
