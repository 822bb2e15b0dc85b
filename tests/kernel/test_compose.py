"""Row grammar, includes, patch layers, interpolation, profiles and layer order."""

from __future__ import annotations

from pathlib import Path

import pytest

from pydsh.kernel import KernelError
from pydsh.kernel.compose import Composition, dsh_home, interpolate, load_yaml, resolve_rows
from pydsh.kernel.profiles import ProfileError, compose_profile, ensure_profile, known_templates


def comp_of(*layers: str) -> Composition:
    comp = Composition()
    for i, text in enumerate(layers):
        comp.apply_patch(load_yaml(text, f"layer{i}"), f"layer{i}")
    comp.check_ids()
    return comp


BASE = """
- insert:
  - {id: a, name: plug-a, config: {x: 1, y: 2}}
  - id: grp
    name: pydsh:group
    isolate: {compaction: true}
    config:
      - {id: inner, name: plug-inner}
"""


def test_insert_and_replace_by_id_replaces_fields_wholesale() -> None:
    comp = comp_of(BASE, "- {id: a, config: {x: 9}}\n- {id: inner, disabled: true}\n")
    a, grp = comp.rows
    assert a.config == {"x": 9}
    assert grp.children[0].disabled is True


def test_insert_before_after_into_and_remove() -> None:
    comp = comp_of(
        BASE,
        "- insert: [{id: first, name: p}]\n  before: a\n"
        "- insert: [{id: deep, name: p}]\n  into: grp\n"
        "- {id: a, remove: true}\n",
    )
    assert [r.id for r in comp.rows] == ["first", "grp"]
    assert [r.id for r in comp.rows[1].children] == ["inner", "deep"]


def test_patch_of_unknown_id_warns_and_skips() -> None:
    comp = comp_of(BASE, "- {id: ghost, disabled: true}\n")
    assert any('unknown row "ghost"' in w for w in comp.warnings)


@pytest.mark.parametrize(
    ("layer", "problem"),
    [
        ("- {id: a, name: other}\n", 'names plugin "other"'),
        ("- insert: [{id: a, name: dup}]\n", 'duplicate row id "a"'),
        ("- insert: [{id: z, name: p, colour: red}]\n", 'unknown field "colour"'),
        ("- {foo: 1}\n", "needs insert or id"),
        ("{not: a list}\n", "must be a list"),
        ("- insert: [{id: q, name: p}\n", "malformed YAML"),
    ],
)
def test_composition_errors_name_the_problem(layer: str, problem: str) -> None:
    with pytest.raises(KernelError) as info:
        comp_of(BASE, layer)
    assert info.value.code == "COMPOSITION_INVALID"
    assert problem in str(info.value)
    assert "layer1" in str(info.value)


def test_interpolation_forms(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path))
    monkeypatch.setenv("PYDSH_T", "val")
    monkeypatch.delenv("PYDSH_UNSET", raising=False)
    value = interpolate(
        {
            "a": "${env:PYDSH_T}",
            "b": "x-${env:PYDSH_UNSET:-dflt}-y",
            "c": "${home:sessions}",
            "d": "$${literal}",
            "e": ["${home}"],
        },
        "row",
    )
    assert value == {
        "a": "val",
        "b": "x-dflt-y",
        "c": str(tmp_path / "sessions"),
        "d": "${literal}",
        "e": [str(tmp_path)],
    }
    with pytest.raises(KernelError, match="PYDSH_UNSET is not set"):
        interpolate("${env:PYDSH_UNSET}", "row")
    with pytest.raises(KernelError, match="unknown interpolation"):
        interpolate("${nope:x}", "row")


def test_disabled_reads_booleans(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYDSH_OFF", "yes")
    comp = comp_of("- insert: [{id: a, name: p, disabled: '${env:PYDSH_OFF}'}, {id: b, name: p}]\n")
    rows = resolve_rows(comp.rows)
    assert [r.disabled for r in rows] == [True, False]
    monkeypatch.setenv("PYDSH_OFF", "maybe")
    with pytest.raises(KernelError, match="boolean"):
        resolve_rows(comp.rows)


def test_interpolation_is_not_applied_to_ids_or_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYDSH_T", "v")
    rows = resolve_rows(comp_of("- insert: [{id: '${env:PYDSH_T}', name: p}]\n").rows)
    assert rows[0].id == "${env:PYDSH_T}"


def test_include_bundle_expands_inline() -> None:
    comp = comp_of("- insert: [{id: inc, name: 'pydsh:include', config: {bundle: agent-tools}}]\n")
    ids = [r.id for r in comp.rows]
    assert "tool-fs" in ids and "inc" not in ids


def test_profile_materialised_from_template_and_layer_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path))
    directory = ensure_profile("sdk")
    assert (directory / "profile.yml").is_file()
    assert (directory / "patch.yml").read_text() == "[]\n"
    assert directory.stat().st_mode & 0o777 == 0o700
    (directory / "patch.yml").write_text("- {id: llm-retry, disabled: true}\n")
    (tmp_path / "patch.yml").write_text("- {id: llm-retry, disabled: false}\n")
    extra = tmp_path / "extra.yml"
    extra.write_text("- insert: [{id: mine, name: my-plugin}]\n")
    comp = compose_profile("sdk", [str(extra)])
    ids = [r.id for r in comp.rows]
    assert ids[-1] == "mine"
    retry = next(r for r in comp.rows if r.id == "llm-retry")
    assert retry.disabled is False


# What DeepSeek Harness 0.2.1rc2 itself left in a shared home: its profile patch layer, comments and all.
REFERENCE_PROFILE_PATCH = """\
# Your patch layer for this dsh profile, applied after every bundle layer:
# a top-level YAML array of loader patch entries (id-targeted config
# overrides, disables, and insert lists; `!!js` expressions allowed).
- {id: tool-todo, disabled: true}
- {id: tool-web, config: {fetch: true, search: false}, disabled: true}
"""


@pytest.mark.parametrize("profile", ["sdk", "headless", "acp", "embed"])
def test_a_reference_profile_patch_in_the_profile_applies_as_the_reference_applies_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, profile: str
) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path))
    (ensure_profile(profile) / "cordis.patch.yml").write_text(REFERENCE_PROFILE_PATCH)
    rows = {r.id: r for r in compose_profile(profile, []).rows}
    assert rows["tool-todo"].disabled is True and rows["tool-web"].disabled is True
    assert rows["tool-fs"].disabled is False


def test_reference_and_pydsh_patch_layers_apply_profile_first_then_home_then_the_command_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The reference applies bundles, the profile's cordis.patch.yml, the home's, then --patch; pydsh's own
    patch.yml of each place follows the reference's file of the same place."""
    monkeypatch.setenv("DSH_HOME", str(tmp_path))
    directory = ensure_profile("sdk")
    layers = {
        directory / "cordis.patch.yml": "profile-cordis",
        directory / "patch.yml": "profile-patch",
        tmp_path / "cordis.patch.yml": "home-cordis",
        tmp_path / "patch.yml": "home-patch",
        tmp_path / "extra.yml": "command-line",
    }
    seen = []
    for path, label in layers.items():
        path.write_text(f"- {{id: llm-retry, config: {{maxAttempts: 1, label: {label}}}}}\n")
        comp = compose_profile("sdk", [str(tmp_path / "extra.yml")] if label == "command-line" else [])
        retry = next(r for r in comp.rows if r.id == "llm-retry")
        seen.append((retry.config["label"], retry.config_source))
    assert seen == [(label, str(path)) for path, label in layers.items()]
    for path in list(layers)[1:]:
        path.unlink()
    assert next(r for r in compose_profile("sdk", []).rows if r.id == "llm-retry").config["label"] == "profile-cordis"


def test_a_reference_profile_patch_pydsh_cannot_read_stops_start_up_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path))
    path = ensure_profile("sdk") / "cordis.patch.yml"
    path.write_text("- {id: plan-mode, disabled: !!js \"!ctx.get('profileContext')\"}\n")
    with pytest.raises(KernelError) as info:
        compose_profile("sdk", [])
    assert info.value.detail.startswith(f"{path}: unsupported !!js expression \"!ctx.get('profileContext')\"")


def test_unknown_profile_lists_templates(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path))
    with pytest.raises(ProfileError) as info:
        ensure_profile("nonesuch")
    assert info.value.exit_code == 2
    for name in known_templates():
        assert name in str(info.value)


def test_missing_plugin_bundle_degrades_alone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path))
    directory = ensure_profile("headless")
    text = (directory / "profile.yml").read_text()
    (directory / "profile.yml").write_text(
        text.replace("bundles: [", "bundles: [absent-plugin, ") + "plugins: {pydsh-absent-plugin: [absent-plugin]}\n"
    )
    comp = compose_profile("headless", [])
    assert comp.warnings == [
        'bundle "absent-plugin" skipped: distribution pydsh-absent-plugin is not installed '
        "(reinstall it, or run pydsh plugin --profile headless remove pydsh-absent-plugin)"
    ]
    assert any(r.id == "session" for r in comp.rows)


def test_dump_round_trips(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path))
    comp = compose_profile("sdk", [])
    again = Composition()
    again.apply_patch([{"insert": load_yaml(comp.dump(), "dump")}], "dump")
    assert again.dump() == comp.dump()


def test_dsh_home_follows_the_variable_and_resolves_a_relative_one_against_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "link"))
    assert dsh_home() == (tmp_path / "real").resolve()
    monkeypatch.setenv("DSH_HOME", "home")
    monkeypatch.chdir(tmp_path / "real")
    assert dsh_home() == (tmp_path / "real" / "home").resolve()
    monkeypatch.chdir(tmp_path)
    assert dsh_home() == (tmp_path / "home").resolve()
    monkeypatch.setenv("DSH_HOME", "")
    assert dsh_home() == Path.home() / ".pydsh"
