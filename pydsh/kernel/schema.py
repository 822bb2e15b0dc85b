"""JSON Schema of a profile's rows and of patch layers (``pydsh --profile NAME --dump-config-schema``).

Derived from the plugins' own ``Config`` models, so an editor or a CI step can check a patch before
pydsh loads it. Every plugin the installed distributions declare is covered (an inserted row may
name any of them), plus the DeepSeek Harness names the profile's rows use. A string holding a
``${…}`` form is admitted wherever a value is, since composing interpolates before validating.
Keys DeepSeek Harness accepts that pydsh maps or ignores (README, "Coming from DeepSeek Harness")
load with a warning but are not in the schema.
"""

from __future__ import annotations

from typing import Any

from pydsh.kernel.compose import GROUP_NAMES, INCLUDE_NAMES, REFERENCE_PREFIX, Row
from pydsh.kernel.errors import KernelError

DIALECT = "https://json-schema.org/draft/2020-12/schema"
ANNOTATIONS = frozenset({"title", "description", "default", "examples"})
INTERPOLATION = {
    "type": "string",
    "pattern": r"\$\{",
    "description": "A ${env:NAME}, ${env:NAME:-default}, ${home}, ${home:sub/dir} or ${cwd} form, expanded "
    "before the config is validated; the expanded value must fit the field.",
}
DESCRIPTION = (
    "The composed row list printed by --dump-config. $defs.patchList describes a patch layer (a profile's "
    "cordis.patch.yml or patch.yml, $DSH_HOME's, or a --patch file). x-pydsh.rows maps each row of this "
    "profile to the schema of its config."
)
COMMENT = (
    "Layers apply in order: the profile's bundles, its cordis.patch.yml and patch.yml, $DSH_HOME's two, then "
    "each --patch. "
    "A patch's config replaces the row's whole config. Service dependencies and plugin start-up are "
    "checked only when the profile loads."
)


def config_schema(profile: str, rows: list[Row]) -> dict[str, Any]:
    """The JSON Schema document of ``profile``'s composed ``rows`` and of its patch files."""
    configs = PluginConfigs()
    for name in sorted(_installed_plugins()):
        configs.add(name)
    entries = [
        {"path": path, "id": row.id, "name": row.name, "status": status, "configRef": ref}
        for path, row in rows_with_paths(rows)
        for status, ref in [configs.of_row(row)]
    ]
    defs = {
        "interpolation": INTERPOLATION,
        "unknownConfig": {"$comment": "No config model is known for this plugin: its config is not described."},
        "noConfig": {"type": ["null", "object"], "maxProperties": 0, "description": "The plugin takes no config."},
        **configs.defs,
        **grammar_defs(configs, entries),
    }
    return {
        "$schema": DIALECT,
        "title": f"pydsh configuration for profile {profile}",
        "description": DESCRIPTION,
        "$comment": COMMENT,
        "type": "array",
        "items": {"$ref": "#/$defs/row"},
        "$defs": defs,
        "x-pydsh": {
            "profile": profile,
            "complete": all(entry["status"] != "absent" for entry in entries),
            "rows": entries,
            "diagnostics": configs.diagnostics,
            "patchSchema": "#/$defs/patchList",
        },
    }


def _installed_plugins() -> list[str]:
    from pydsh.kernel.plugin import entry_point_table

    return list(entry_point_table())


def rows_with_paths(rows: list[Row], base: str = "") -> list[tuple[str, Row]]:
    """Each row of the tree with its JSON Pointer into the row list (``/3/config/0`` inside a group)."""
    out: list[tuple[str, Row]] = []
    for index, row in enumerate(rows):
        path = f"{base}/{index}"
        out.append((path, row))
        out.extend(rows_with_paths(row.children, f"{path}/config"))
    return out


def pointer(key: str) -> str:
    """``#/$defs/<key>`` with the key escaped as a JSON Pointer token."""
    return "#/$defs/" + key.replace("~", "~0").replace("/", "~1")


class PluginConfigs:
    """The config schema of each plugin, by the name pydsh resolves, and which row names mean which plugin."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}
        self.refs: dict[str, tuple[str, str]] = {}
        """plugin -> (status, ``$ref`` of its config): ``schema``, ``no-config`` or ``absent``."""
        self.spellings: dict[str, set[str]] = {}
        """plugin -> the row names that resolve to it (its own, and reference names in the rows)."""
        self.diagnostics: list[str] = []

    def add(self, name: str) -> str:
        """Describe plugin ``name`` once; returns the plugin name the row name resolves to."""
        plugin = _canonical(name)
        self.spellings.setdefault(plugin, set()).add(name)
        if plugin not in self.refs:
            self.refs[plugin] = self._describe(plugin)
        return plugin

    def of_row(self, row: Row) -> tuple[str, str]:
        """``(status, configRef)`` of one composed row."""
        if row.is_group:
            return "group", "#/$defs/rowList"
        return self.refs[self.add(row.name)]

    def _describe(self, plugin: str) -> tuple[str, str]:
        from pydsh.kernel.plugin import resolve_plugin

        try:
            model = resolve_plugin(plugin).config_model
        except KernelError as exc:
            self.diagnostics.append(f"plugin {plugin}: {exc.detail}")
            return "absent", "#/$defs/unknownConfig"
        if model is None:
            return "no-config", "#/$defs/noConfig"
        key = f"config:{plugin}"
        pydantic_model = model._pydantic() if hasattr(model, "_pydantic") else model
        try:
            raw = pydantic_model.model_json_schema(ref_template=pointer(f"{key}:") + "{model}")
        except Exception as exc:  # a model pydantic cannot describe is reported, not fatal
            self.diagnostics.append(f"plugin {plugin}: its config model has no JSON Schema ({exc})")
            return "absent", "#/$defs/unknownConfig"
        for nested, schema in raw.pop("$defs", {}).items():
            self.defs[f"{key}:{nested}"] = interpolable_fields(schema)
        raw["title"] = plugin
        self.defs[key] = nullable(interpolable_fields(raw))
        return "schema", pointer(key)


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """A config schema that also admits ``null`` (a row without config validates ``{}``)."""
    if schema.get("type") == "object":
        return {**schema, "type": ["object", "null"]}
    return {"anyOf": [{"type": "null"}, schema]}


def _canonical(name: str) -> str:
    """The pydsh plugin a row name resolves to (DeepSeek Harness names through :mod:`pydsh.kernel.reference`)."""
    if not name.startswith(REFERENCE_PREFIX):
        return name
    from pydsh.kernel.reference import canonical

    return canonical(name)


def interpolable_fields(schema: Any) -> Any:
    """``schema`` with every property, item and map value also admitting a ``${…}`` string."""
    if isinstance(schema, list):
        return [interpolable_fields(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: interpolable(interpolable_fields(field)) for name, field in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = interpolable(interpolable_fields(value))
        else:
            out[key] = interpolable_fields(value)
    return out


def interpolable(schema: dict[str, Any]) -> dict[str, Any]:
    """One value's schema widened to a ``${…}`` string too (a plain string field already admits one)."""
    inner = {k: v for k, v in schema.items() if k not in ANNOTATIONS}
    if not inner or inner == {"type": "string"}:
        return schema
    outer = {k: v for k, v in schema.items() if k in ANNOTATIONS}
    return {**outer, "anyOf": [inner, {"$ref": "#/$defs/interpolation"}]}


def grammar_defs(configs: PluginConfigs, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Rows, row lists, includes and patch operations (spec 01 §11.1–11.4), tied to the config schemas."""
    by_name = [
        {
            "if": {"properties": {"name": {"enum": sorted(configs.spellings[plugin])}}, "required": ["name"]},
            "then": {"properties": {"config": {"$ref": ref}}},
        }
        for plugin, (_status, ref) in configs.refs.items()
    ]
    by_id = [
        {
            "if": {"properties": {"id": {"const": entry["id"]}}, "required": ["id"]},
            "then": {"properties": {"config": {"$ref": entry["configRef"]}}},
        }
        for entry in entries
    ]
    strings = {"type": "array", "items": {"type": "string"}}
    disabled = {"anyOf": [{"type": ["boolean", "null"]}, {"$ref": "#/$defs/interpolation"}]}
    isolate = {"type": ["object", "null"], "additionalProperties": {"anyOf": [{"const": True}, {"type": "string"}]}}
    fields: dict[str, Any] = {"id": {"type": "string", "minLength": 1}, "name": {"type": "string", "minLength": 1}}
    fields |= {"config": {}, "disabled": disabled, "isolate": isolate, "inject": strings}
    group = {"if": _named(GROUP_NAMES), "then": {"properties": {"config": {"$ref": "#/$defs/rowList"}}}}
    group["else"] = {"not": {"required": ["isolate"]}}
    include = {"if": _named(INCLUDE_NAMES), "then": {"properties": {"config": {"$ref": "#/$defs/includeConfig"}}}}
    return {
        "row": {
            "type": "object",
            "required": ["id", "name"],
            "properties": {**fields, "group": {"type": ["boolean", "null"]}},
            "additionalProperties": False,
            "allOf": [group, include, *by_name],
        },
        "rowList": {"type": "array", "items": {"$ref": "#/$defs/row"}},
        "includeConfig": {
            "type": "object",
            "properties": {"bundle": {"type": "string"}, "path": {"type": "string"}},
            "anyOf": [{"required": ["bundle"]}, {"required": ["path"]}],
        },
        "patchList": {"type": "array", "items": {"$ref": "#/$defs/patch"}},
        "patch": {
            "type": "object",
            "if": {"required": ["insert"]},
            "then": {"$ref": "#/$defs/insert"},
            "else": {
                "if": {"required": ["remove"]},
                "then": {"$ref": "#/$defs/remove"},
                "else": {"$ref": "#/$defs/replace"},
            },
        },
        "insert": {
            "type": "object",
            "required": ["insert"],
            "properties": {"insert": {"$ref": "#/$defs/rowList"}}
            | {key: {"type": "string"} for key in ("before", "after", "into", "id")},
            "additionalProperties": False,
            "description": "Adds rows at the end, before/after a row, or into a group (id is DeepSeek Harness's into).",
        },
        "remove": {
            "type": "object",
            "required": ["id", "remove"],
            "properties": {"id": fields["id"], "remove": {"const": True}},
            "additionalProperties": False,
        },
        "replace": {
            "type": "object",
            "required": ["id"],
            "properties": dict(fields),
            "additionalProperties": False,
            "allOf": by_id,
            "description": "Replaces each given field of row id wholesale; a name must name the row's plugin.",
        },
    }


def _named(names: frozenset[str]) -> dict[str, Any]:
    return {"properties": {"name": {"enum": sorted(names)}}, "required": ["name"]}
