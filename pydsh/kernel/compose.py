"""Compositions: YAML rows, groups, includes, patch layers, interpolation, profiles (spec 01 §11).

A process is a tree of rows composed from layers applied to an empty list: the profile's
bundles, its ``cordis.patch.yml`` and ``patch.yml``, the home's two, and each ``--patch`` file
(:func:`pydsh.kernel.profiles.user_layers`). Every problem is
a :class:`KernelError` ``COMPOSITION_INVALID`` naming the file and what is wrong with it.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydsh.kernel.errors import KernelError

ROW_FIELDS = frozenset({"id", "name", "config", "disabled", "group", "isolate", "inject"})
PATCH_FIELDS = frozenset({"name", "config", "disabled", "isolate", "inject"})
INCLUDE_NAMES = frozenset({"pydsh:include", "cordis:include"})
GROUP_NAMES = frozenset({"pydsh:group", "cordis:group"})
SHIPPED = Path(__file__).resolve().parent.parent / "profiles"
COMMAND_WORDS = frozenset({"plugin", "demo"})
REFERENCE_PREFIX = "@deepseek-ai/"
"""Plugin names of DeepSeek Harness compositions (resolved through :mod:`pydsh.kernel.reference`)."""


def dsh_home() -> Path:
    """``$DSH_HOME`` (default ``~/.pydsh``) as an absolute path."""
    raw = os.environ.get("DSH_HOME", "").strip()
    return _resolved(raw, os.getcwd()) if raw else Path.home() / ".pydsh"


@functools.lru_cache(maxsize=64)
def _resolved(raw: str, cwd: str) -> Path:
    """``raw`` made absolute against ``cwd``, symbolic links resolved: once per value, not at every step of every
    agent (instruction files and skills are looked up under the home at each step; each resolve costs a
    ``lstat`` per path component)."""
    return Path(cwd, Path(raw).expanduser()).resolve()


def fail(where: str, problem: str) -> KernelError:
    return KernelError("COMPOSITION_INVALID", f"{where}: {problem}")


@dataclass
class Row:
    """One composition row; group rows carry their child rows in ``children``."""

    id: str
    name: str
    config: Any = None
    disabled: Any = False
    isolate: dict[str, Any] | None = None
    inject: list[str] = field(default_factory=list)
    children: list[Row] = field(default_factory=list)
    source: str = ""
    """The layer (bundle or file) that inserted the row, for error messages."""
    config_source: str = ""
    """The patch layer that last replaced ``config`` ("" = as inserted), for error messages."""

    @property
    def is_group(self) -> bool:
        return self.name in GROUP_NAMES

    def to_yaml_obj(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "name": self.name}
        if self.disabled is not False:
            out["disabled"] = self.disabled
        if self.isolate:
            out["isolate"] = dict(self.isolate)
        if self.inject:
            out["inject"] = list(self.inject)
        if self.is_group:
            out["config"] = [child.to_yaml_obj() for child in self.children]
        elif self.config is not None:
            out["config"] = self.config
        return out


# -- YAML ------------------------------------------------------------------------------------


_LOADER: Any = None


def _safe_loader() -> Any:
    """The safe YAML loader, taught DeepSeek Harness's ``!!js`` scalars (read as interpolation forms)."""
    global _LOADER
    if _LOADER is None:
        import yaml

        class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
            """Safe loading plus ``!!js``."""

        Loader.add_constructor("tag:yaml.org,2002:js", _js_scalar)
        _LOADER = Loader
    return _LOADER


def _js_scalar(loader: Any, node: Any) -> str:
    from pydsh.kernel.reference import js_form

    return js_form(str(loader.construct_scalar(node)))


def load_yaml(text: str, where: str) -> Any:
    import yaml

    try:
        return yaml.load(text, Loader=_safe_loader())  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        raise fail(where, f"malformed YAML: {' '.join(str(exc).split())}") from None
    except KernelError as exc:
        raise fail(where, exc.detail) from None


READS: dict[str, str | None] | None = None
"""While a composition is cached: every file it read (absolute path -> text, ``None`` = absent)."""


def note_read(path: Path, text: str | None) -> None:
    """Record that composing read ``path`` (``None``: found it absent), when reads are being recorded."""
    if READS is not None:
        READS[str(path.absolute())] = text


def read_yaml_file(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise fail(str(path), "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(str(path), f"cannot read file ({exc})") from None
    note_read(path, text)
    return load_yaml(text, str(path))


# -- rows ------------------------------------------------------------------------------------


def parse_row(raw: object, where: str, includes: IncludeResolver) -> list[Row]:
    """Parse one raw row; an include row expands to the rows it names."""
    if not isinstance(raw, dict):
        raise fail(where, f"a row must be a mapping, got {type(raw).__name__}")
    row_id = raw.get("id")
    name = raw.get("name")
    if not isinstance(row_id, str) or not row_id:
        raise fail(where, f"row without a string id: {_brief(raw)}")
    for key in raw:
        if key not in ROW_FIELDS:
            raise fail(where, f'row "{row_id}" has unknown field "{key}"')
    if not isinstance(name, str) or not name:
        raise fail(where, f'row "{row_id}" needs a string name')
    if name in INCLUDE_NAMES:
        return includes.expand(raw.get("config"), f'{where} (include row "{row_id}")')
    row = Row(id=row_id, name=name, config=raw.get("config"), source=where)
    _set_fields(row, raw, where)
    if row.is_group:
        children = raw.get("config") or []
        if not isinstance(children, list):
            raise fail(where, f'group row "{row_id}" needs a list of rows as config')
        row.children = parse_rows(children, where, includes)
        row.config = None
    elif "isolate" in raw:
        raise fail(where, f'row "{row_id}": isolate is only allowed on group rows')
    return [row]


def _set_fields(row: Row, raw: dict[str, Any], where: str) -> None:
    if "disabled" in raw:
        value = False if raw["disabled"] is None else raw["disabled"]
        if not isinstance(value, (bool, str)):
            raise fail(where, f'row "{row.id}": disabled must be a boolean or a ${{…}} string')
        row.disabled = value
    if "isolate" in raw:
        iso = raw["isolate"]
        if iso is not None and not (
            isinstance(iso, dict) and all(v is True or isinstance(v, str) for v in iso.values())
        ):
            raise fail(where, f'row "{row.id}": isolate must map service names to true or a label')
        row.isolate = dict(iso) if iso else None
    if "inject" in raw:
        inj = raw["inject"]
        if not (isinstance(inj, list) and all(isinstance(x, str) for x in inj)):
            raise fail(where, f'row "{row.id}": inject must be a list of service names')
        row.inject = list(inj)


def parse_rows(raw: object, where: str, includes: IncludeResolver) -> list[Row]:
    if not isinstance(raw, list):
        raise fail(where, "rows must be a list")
    out: list[Row] = []
    for item in raw:
        out.extend(parse_row(item, where, includes))
    return out


def walk(rows: list[Row]) -> Iterator[tuple[list[Row], Row]]:
    """Every row of the tree with the list that holds it, depth first."""
    for row in rows:
        yield rows, row
        if row.children:
            yield from walk(row.children)


def find_row(rows: list[Row], row_id: str) -> tuple[list[Row], Row] | None:
    for holder, row in walk(rows):
        if row.id == row_id:
            return holder, row
    return None


def same_plugin(named: object, name: str) -> bool:
    """Whether a patch's ``name`` names the row's plugin, counting DeepSeek Harness names as their pydsh ones."""
    if named == name:
        return True
    if not isinstance(named, str) or not (named.startswith(REFERENCE_PREFIX) or name.startswith(REFERENCE_PREFIX)):
        return False
    from pydsh.kernel.reference import canonical

    return canonical(named) == canonical(name)


def _brief(obj: object) -> str:
    text = repr(obj)
    return text if len(text) <= 80 else text[:77] + "..."


# -- bundles and includes ----------------------------------------------------------------------


class IncludeResolver:
    """Resolves ``pydsh:include`` targets and bundle names (shipped, then ``pydsh.bundles``)."""

    def __init__(self) -> None:
        self._depth = 0

    def expand(self, config: object, where: str) -> list[Row]:
        if not isinstance(config, dict) or not ({"bundle", "path"} & config.keys()):
            raise fail(where, "include needs config {bundle: <name>} or {path: <file>}")
        if self._depth > 8:
            raise fail(where, "includes nest too deeply")
        self._depth += 1
        try:
            if "bundle" in config:
                ops = self.bundle_ops(str(config["bundle"]), where)
                return _inserted_rows(ops, f"bundle {config['bundle']}", self)
            path = Path(str(config["path"])).expanduser()
            raw = read_yaml_file(path)
            if isinstance(raw, list) and raw and all(isinstance(x, dict) and "insert" in x for x in raw):
                return _inserted_rows(raw, str(path), self)
            return parse_rows(raw, str(path), self)
        finally:
            self._depth -= 1

    def bundle_ops(self, name: str, where: str) -> list[Any]:
        """The patch list of a shipped bundle (strict: errors fail composition)."""
        path = SHIPPED / f"{name}.yml"
        if not path.is_file():
            raise fail(where, f'unknown bundle "{name}"')
        raw = read_yaml_file(path)
        if not isinstance(raw, list):
            raise fail(str(path), "a bundle must be a list of patch operations")
        return raw


def _inserted_rows(ops: list[Any], where: str, includes: IncludeResolver) -> list[Row]:
    rows: list[Row] = []
    for op in ops:
        if not isinstance(op, dict) or "insert" not in op:
            raise fail(where, "an included bundle may only contain insert operations")
        rows.extend(parse_rows(op["insert"], where, includes))
    return rows


# -- patch layers ----------------------------------------------------------------------------


@dataclass
class Composition:
    """The composed row tree plus the warnings produced on the way."""

    rows: list[Row] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    includes: IncludeResolver = field(default_factory=IncludeResolver)

    def apply_patch(self, ops: object, where: str) -> None:
        """Apply one patch layer (a YAML list of operations) in order."""
        if not isinstance(ops, list):
            raise fail(where, "a patch file must be a list of operations")
        for op in ops:
            if not isinstance(op, dict):
                raise fail(where, f"a patch operation must be a mapping, got {_brief(op)}")
            if "insert" in op:
                self._insert(op, where)
            elif "id" in op:
                self._replace(op, where)
            else:
                raise fail(where, f"patch operation needs insert or id: {_brief(op)}")

    def _insert(self, op: dict[str, Any], where: str) -> None:
        extra = set(op) - {"insert", "before", "after", "into", "id"}
        if extra:
            raise fail(where, f"insert operation has unknown key(s) {sorted(extra)}")
        if "id" in op:
            if "into" in op:
                raise fail(where, "an insert operation takes into or id (DeepSeek Harness's spelling), not both")
            op = {**op, "into": op["id"]}
        rows = parse_rows(op["insert"], where, self.includes)
        taken = {r.id for _h, r in walk(self.rows)}
        for _h, new in walk(rows):
            if new.id in taken:
                raise fail(where, f'duplicate row id "{new.id}"')
            taken.add(new.id)
        target = self.rows
        index = len(target)
        if "into" in op:
            found = find_row(self.rows, str(op["into"]))
            if found is None or not found[1].is_group:
                raise fail(where, f'insert into unknown group "{op["into"]}"')
            target = found[1].children
            index = len(target)
        for key in ("before", "after"):
            if key in op:
                found = find_row(self.rows, str(op[key]))
                if found is None:
                    self.warnings.append(f'{where}: insert {key} unknown row "{op[key]}"; appended at the end')
                    continue
                target = found[0]
                index = target.index(found[1]) + (1 if key == "after" else 0)
        target[index:index] = rows

    def _replace(self, op: dict[str, Any], where: str) -> None:
        row_id = str(op["id"])
        found = find_row(self.rows, row_id)
        if found is None:
            self.warnings.append(f'{where}: patch targets unknown row "{row_id}"; skipped')
            return
        holder, row = found
        if op.get("remove") is True:
            extra = set(op) - {"id", "remove"}
            if extra:
                raise fail(where, f'remove of "{row_id}" has unknown key(s) {sorted(extra)}')
            holder.remove(row)
            return
        extra = set(op) - PATCH_FIELDS - {"id"}
        if extra:
            raise fail(where, f'patch of "{row_id}" has unknown field(s) {sorted(extra)}')
        if "name" in op and not same_plugin(op["name"], row.name):
            raise fail(where, f'patch of "{row_id}" names plugin "{op["name"]}" but the row is "{row.name}"')
        if "config" in op:
            if row.is_group:
                row.children = parse_rows(op["config"] or [], where, self.includes)
            else:
                row.config = op["config"]
                row.config_source = where
        _set_fields(row, {k: v for k, v in op.items() if k in ("disabled", "isolate", "inject")}, where)

    def check_ids(self) -> None:
        seen: set[str] = set()
        for _holder, row in walk(self.rows):
            if row.id in seen:
                raise fail("composition", f'duplicate row id "{row.id}"')
            seen.add(row.id)

    def dump(self) -> str:
        import yaml

        return yaml.safe_dump([r.to_yaml_obj() for r in self.rows], sort_keys=False, allow_unicode=True)


# -- interpolation ---------------------------------------------------------------------------

_FORM = re.compile(r"\$\$\{|\$\{([^}]*)\}")
_TRUE = frozenset({"true", "yes", "1"})
_FALSE = frozenset({"false", "no", "0", ""})


def _expand_form(body: str, where: str) -> str:
    prefix, _, rest = body.partition(":")
    if prefix == "env" and rest:
        name, sep, default = rest.partition(":-")
        value = os.environ.get(name)
        if sep:
            return value if value else default
        if value is None:
            raise fail(where, f"environment variable {name} is not set (used as ${{env:{name}}})")
        return value
    if prefix == "home":
        home = dsh_home()
        return str(home / rest) if rest else str(home)
    if prefix == "cwd" and not rest:
        return os.getcwd()
    raise fail(where, f"unknown interpolation ${{{body}}}")


def interpolate_str(text: str, where: str) -> str:
    if "$" not in text:
        return text

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$${":
            return "${"
        return _expand_form(m.group(1), where)

    return _FORM.sub(sub, text)


def interpolate(value: Any, where: str) -> Any:
    """Expand ``${…}`` forms in every string scalar of ``value`` (keys untouched)."""
    if isinstance(value, str):
        return interpolate_str(value, where)
    if isinstance(value, list):
        return [interpolate(v, where) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v, where) for k, v in value.items()}
    return value


def resolve_disabled(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = interpolate_str(str(value), where).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise fail(where, f"disabled must read as a boolean, got {text!r}")


def resolve_rows(rows: list[Row]) -> list[Row]:
    """A copy of ``rows`` with interpolation applied to ``config`` and ``disabled``."""
    out: list[Row] = []
    for row in rows:
        where = f'row "{row.id}"'
        out.append(
            Row(
                id=row.id,
                name=row.name,
                config=None if row.is_group else interpolate(row.config, where),
                disabled=resolve_disabled(row.disabled, where),
                isolate=row.isolate,
                inject=list(row.inject),
                children=resolve_rows(row.children),
                source=row.source,
                config_source=row.config_source,
            )
        )
    return out
