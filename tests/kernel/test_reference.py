"""DeepSeek Harness compositions: plugin aliases, skipped rows, reference config keys, ``!!js``, patches."""

from __future__ import annotations

import logging
import tomllib
from pathlib import Path
from typing import Any

import pytest

from pydsh.kernel import Kernel, KernelError
from pydsh.kernel.compose import Composition, Row, load_yaml
from pydsh.kernel.fiber import ACTIVE
from pydsh.kernel.plugin import entry_point_table, resolve_plugin, validate_config
from pydsh.kernel.reference import ALIASES, BUILT_IN
from tests.kernel.sample_plugins import LOG

REPO = Path(__file__).resolve().parents[2]


def validated(name: str, config: object) -> tuple[Any, list[str]]:
    notes: list[str] = []
    return validate_config("r", resolve_plugin(name), config, notes.append), notes


@pytest.mark.parametrize(
    ("reference", "ours"),
    [
        ("@deepseek-ai/dsh-compaction-tool-result-pruner", "tool-result-pruner"),
        ("@deepseek-ai/dsh-jobs-local", "jobs"),
        ("@deepseek-ai/dsh-sdk-jsonrpc-server", "sdk-server"),
        ("@deepseek-ai/dsh-tool-bash", "tool-bash"),
        ("@deepseek-ai/dsh-tool-fs-search", "tool-fs-search"),
        ("@deepseek-ai/dsh-goal", "goals"),
        ("@deepseek-ai/dsh-goal-round-driver", "goal-round-driver"),
        ("@deepseek-ai/dsh-tool-goal", "tool-goal"),
        ("@deepseek-ai/dsh-plan-mode", "plan-mode"),
    ],
)
def test_reference_names_resolve_to_the_pydsh_plugin_of_the_same_role(reference: str, ours: str) -> None:
    assert resolve_plugin(reference).target is resolve_plugin(ours).target


def test_every_alias_names_an_installed_plugin_and_the_readme_lists_it() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Coming from DeepSeek Harness") :]
    for reference, ours in ALIASES.items():
        assert ours in entry_point_table()
        assert f"`{reference}` | `{ours}`" in section
    for reference in BUILT_IN:
        assert f"`{reference}`" in section


def _row_names(rows: list[Any]) -> list[str]:
    """The plugin names of ``rows``, with the rows inside groups and presets."""
    names: list[str] = []
    for row in rows:
        if "insert" in row:
            names += _row_names(row["insert"])
            continue
        if "name" not in row:  # a patch of a row's config or switch keeps its plugin
            continue
        names.append(row["name"])
        if row["name"] == "pydsh:group":
            names += _row_names(row["config"])
        elif row["name"] == "agent-preset":
            names += _row_names(row["config"]["plugins"])
    return names


def test_every_shipped_row_names_a_plugin_pyproject_declares() -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"]
    names = set(declared["pydsh.plugins"]) | {"pydsh:group"}
    for bundle in sorted((REPO / "pydsh" / "profiles").glob("*.yml")):
        for name in _row_names(load_yaml(bundle.read_text(encoding="utf-8"), bundle.name)):
            assert name in names, f"{bundle.name}: row names {name!r}, not an entry point of pyproject.toml"


def test_a_patch_may_name_the_row_s_plugin_by_its_reference_name() -> None:
    comp = Composition()
    comp.apply_patch(load_yaml("- insert: [{id: p, name: tool-result-pruner}]", "l0"), "l0")
    comp.apply_patch(
        load_yaml("- {id: p, name: '@deepseek-ai/dsh-compaction-tool-result-pruner', config: {headChars: 1}}", "l1"),
        "l1",
    )
    assert comp.rows[0].config == {"headChars": 1}
    with pytest.raises(KernelError, match='names plugin "@deepseek-ai/dsh-tool-bash" but the row is'):
        comp.apply_patch(load_yaml("- {id: p, name: '@deepseek-ai/dsh-tool-bash'}", "l2"), "l2")


async def test_a_reference_row_pydsh_lacks_is_skipped_with_one_warning_and_the_rest_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    LOG.clear()
    kernel = Kernel()
    rows = [
        Row(id="ui-goal", name="@deepseek-ai/dsh-client-ui-goal"),
        Row(id="spawn", name="@deepseek-ai/dsh-subagent-spawn-in-process"),
        Row(id="off", name="@deepseek-ai/dsh-plan-mode", disabled=True),
        Row(id="echo", name="tests.kernel.sample_plugins:provider"),
    ]
    with caplog.at_level(logging.WARNING, logger="pydsh.kernel"):
        await kernel.load(rows)
        await kernel.load([Row(id="ui-goal", name="@deepseek-ai/dsh-client-ui-goal")])
    assert kernel.loader.failures == []
    assert [child.state for child in kernel.fiber.children] == [ACTIVE]
    assert LOG == ["provider:hi"]
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [
        'row "ui-goal" (@deepseek-ai/dsh-client-ui-goal) skipped: pydsh has no such plugin',
        'row "spawn" (@deepseek-ai/dsh-subagent-spawn-in-process) skipped: pydsh has no such plugin '
        "(the subagent row provides the spawn provider)",
    ]
    await kernel.dispose()


@pytest.mark.parametrize(
    ("name", "config", "field", "value"),
    [
        ("tool-jobs", {"waitTimeoutMs": 5000, "maxWaitTimeoutMs": 9000}, "defaultWaitMs", 5000),
        ("permission", {"defaultPreset": "read-only"}, "mode", "read-only"),
        ("tool-fs-search", {"sampleOverCapGlobResults": True, "globMaxResults": 7}, "globMaxResults", 7),
        ("tool-subagent", {"provider": "spawn", "toolName": "delegate"}, "toolName", "delegate"),
        ("tool-web", {"fetch": True, "fetchMaxOutputChars": 200000}, "maxOutputChars", 200000),
        (
            "system-prompt",
            {"personaPrefix": "Be brief.", "includeHarnessIdentity": False},
            "personaPrefix",
            "Be brief.",
        ),
    ],
)
def test_reference_keys_pydsh_has_take_effect(name: str, config: dict[str, object], field: str, value: object) -> None:
    result, notes = validated(name, config)
    assert getattr(result, field) == value
    assert notes == []


@pytest.mark.parametrize(
    ("name", "config"),
    [
        ("tools", {"mode": "native"}),
        ("tool-todo", {"allowParallelInProgress": True}),
        ("agent-loop", {"agents": []}),
        ("tool-web", {"fetch": True, "search": False}),
    ],
)
def test_reference_values_pydsh_already_behaves_as_are_accepted_silently(name: str, config: dict[str, object]) -> None:
    assert validated(name, config)[1] == []


def test_reference_keys_without_effect_here_are_accepted_with_one_warning_each() -> None:
    result, notes = validated("session-persistence-jsonl", {"root": "/s", "compression": "zstd", "listConcurrency": 8})
    assert (result.root, result.compression) == ("/s", "zstd")
    assert notes == [
        'row "r" (session-persistence-jsonl): listConcurrency: a DeepSeek Harness key that has no effect here'
    ]
    result, notes = validated("tool-web", {"search": True, "fetch": True, "searchMaxResults": 8})
    assert result.fetch is True
    assert notes == [
        'row "r" (tool-web): search: a DeepSeek Harness key that has no effect here; web_search is out of scope',
        'row "r" (tool-web): searchMaxResults: a DeepSeek Harness key that has no effect here',
    ]
    _, notes = validated("tools", {"mode": "ptc", "maxParallelSubCalls": 4})
    assert notes == [
        'row "r" (tools): mode: a DeepSeek Harness key that has no effect here; pydsh calls tools natively',
        'row "r" (tools): maxParallelSubCalls: a DeepSeek Harness key that has no effect here',
    ]


UNKNOWN = "a key pydsh does not know; ignored, as DeepSeek Harness ignores keys it does not know"


@pytest.mark.parametrize(
    ("name", "config", "field", "value", "notes"),
    [
        ("system-prompt", {"persona": "I review."}, "personaPrefix", None, [f"persona: {UNKNOWN}"]),
        (
            "system-prompt",
            {"personaPrefx": "Be brief.", "includeHarnessIdentity": False},
            "includeHarnessIdentity",
            False,
            [f'personaPrefx: {UNKNOWN} (did you mean "personaPrefix"?)'],
        ),
        ("tool-todo", {"bogus": 1, "allowParallelInProgress": True}, None, None, [f"bogus: {UNKNOWN}"]),
        ("tool-jobs", {"bogus": 1, "waitTimeoutMs": 5}, "defaultWaitMs", 5, [f"bogus: {UNKNOWN}"]),
        (
            "session-persistence-jsonl",
            {"root": "/s", "compresion": "none"},
            "compression",
            "zstd",
            [f'compresion: {UNKNOWN} (did you mean "compression"?)'],
        ),
        (
            "llm-deepseek",
            {"models": [{"id": "m", "contextWindow": 9, "vision": True}], "listConcurrency": 2},
            "models",
            None,
            [f"models.0.vision: {UNKNOWN}", f"listConcurrency: {UNKNOWN}"],
        ),
    ],
)
def test_keys_pydsh_does_not_know_on_a_reference_plugin_s_row_are_ignored_with_one_warning_each(
    name: str, config: dict[str, object], field: str | None, value: object, notes: list[str]
) -> None:
    """DeepSeek Harness 0.2.1rc2 drops keys its schema does not name, at any depth, and starts."""
    result, seen = validated(name, config)
    if field == "models":
        assert [(m.id, m.contextWindow) for m in result.models] == [("m", 9)]
    elif field is not None:
        assert getattr(result, field) == value
    assert sorted(seen) == sorted(f'row "r" ({name}): {note}' for note in notes)


@pytest.mark.parametrize(
    ("name", "config", "error"),
    [
        (
            "llm-openai-compat",
            {"providers": [], "provider": "local"},
            'CONFIG_INVALID: row "r" (llm-openai-compat): provider: Extra inputs are not permitted',
        ),
        (
            "invariants",
            {"enabld": True},
            'CONFIG_INVALID: row "r" (invariants): enabld: Extra inputs are not permitted',
        ),
        (
            "system-prompt",
            {"persona": "x", "personaPrefix": 5},
            'CONFIG_INVALID: row "r" (system-prompt): personaPrefix: Input should be a valid string',
        ),
    ],
)
def test_unknown_keys_on_pydsh_s_own_plugins_and_wrong_types_anywhere_are_refused(
    name: str, config: object, error: str
) -> None:
    """pydsh's own plugins have no reference reading to follow; a known key of the wrong type fails in both."""
    with pytest.raises(KernelError) as info:
        validated(name, config)
    assert str(info.value).endswith(error)


def test_a_patch_replaces_the_whole_config_as_the_reference_does() -> None:
    comp = Composition()
    comp.apply_patch(load_yaml("- insert: [{id: s, name: p, config: {root: /s, compression: none}}]", "b"), "bundle b")
    comp.apply_patch(load_yaml("- {id: s, config: {compression: zstd}}", "p.yml"), "p.yml")
    row = comp.rows[0]
    assert (row.config, row.config_source) == ({"compression": "zstd"}, "p.yml")
    info = resolve_plugin("session-persistence-jsonl")
    with pytest.raises(KernelError) as caught:
        validate_config("s", info, row.config, origin=row.config_source)
    assert caught.value.detail == (
        'row "s" (session-persistence-jsonl): root: Field required (the config was replaced by p.yml: a patch '
        "replaces a row's whole config, so restate every field the row needs)"
    )


def test_the_reference_s_insert_into_a_group_by_id_and_null_disabled() -> None:
    comp = Composition()
    comp.apply_patch(load_yaml("- insert: [{id: g, name: 'pydsh:group', config: [{id: a, name: p}]}]", "l0"), "l0")
    comp.apply_patch(load_yaml("- insert: [{id: b, name: p, disabled: null}]\n  id: g", "l1"), "l1")
    assert [(r.id, r.disabled) for r in comp.rows[0].children] == [("a", False), ("b", False)]
    with pytest.raises(KernelError, match="takes into or id"):
        comp.apply_patch(load_yaml("- insert: [{id: c, name: p}]\n  id: g\n  into: g", "l2"), "l2")


@pytest.mark.parametrize(
    ("expression", "form"),
    [
        ("dshHomePath('sessions')", "${home:sessions}"),
        ('dshHomePath("a/b")', "${home:a/b}"),
        ("dshHomePath()", "${home}"),
        ("process.cwd()", "${cwd}"),
        ("process.env.DSH_X", "${env:DSH_X}"),
        ("process.env.DSH_X ?? 'workspace-write'", "${env:DSH_X:-workspace-write}"),
        ('process.env.DSH_X || "y"', "${env:DSH_X:-y}"),
    ],
)
def test_js_values_pydsh_can_read_become_interpolation_forms(expression: str, form: str) -> None:
    assert load_yaml(f"v: !!js {expression!r}", "f") == {"v": form}


def test_other_js_values_are_one_clear_composition_error() -> None:
    with pytest.raises(KernelError) as info:
        load_yaml("- {id: a, disabled: !!js \"process.platform === 'win32'\"}", "patch.yml")
    assert info.value.detail.startswith(
        "patch.yml: unsupported !!js expression \"process.platform === 'win32'\": pydsh has no expression language"
    )
