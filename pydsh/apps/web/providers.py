"""Providers and keys of the Settings dialog (spec 12 F41, F42; S8).

Keys go to ``$DSH_HOME/credentials.json`` (0600) and never come back out. Route entries and the
default route go to the ``web`` profile's ``patch.yml``, which every later start reads: so everything is
checked before anything is written (ids, the entry against the route schema), ``${`` in user text is
escaped so start-up does not read it as interpolation, the new text must load back to exactly what was
meant, and the file is replaced atomically. A bad request changes no file.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pydsh.apps.web.errors import ApiError
from pydsh.apps.web.files import read_json, write_json, write_text
from pydsh.kernel.context import Context
from pydsh.llm.keys import LLM
from pydsh.llm.types import ModelInfo

log = logging.getLogger("pydsh.web")

KEY_ENV = {"deepseek-official": "DEEPSEEK_API_KEY", "openai-compat": "OPENAI_API_KEY"}
PROVIDER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
ID_RULE = "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"


class ProviderModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    label: str | None = None
    contextWindow: int | None = Field(default=None, gt=0)
    efforts: list[str] = []


class ProviderBody(BaseModel):
    """``POST/PUT /api/providers``: the key is write-only (S8)."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["deepseek", "openai-compatible"]
    id: str | None = None
    label: str | None = None
    baseUrl: str | None = None
    apiKey: str | None = None
    models: list[ProviderModel] | None = None


def check_id(provider_id: str) -> str:
    """``provider_id`` if it is a plain route id (no path, space or control character), else 422."""
    if not PROVIDER_ID.fullmatch(provider_id):
        raise ApiError(422, "invalid_field", f'Field "id" must be {ID_RULE}.')
    return provider_id


def escaped(value: Any) -> Any:
    """``value`` with ``${`` written as ``$${`` in every string, so start-up reads it back literally."""
    if isinstance(value, str):
        return value.replace("${", "$${")
    if isinstance(value, list):
        return [escaped(v) for v in value]
    if isinstance(value, dict):
        return {k: escaped(v) for k, v in value.items()}
    return value


class Providers:
    """The key store and the route entries of one profile."""

    def __init__(self, ctx: Context, home: Path, profile: str) -> None:
        self.ctx = ctx
        self.home = home
        self.profile = profile

    def key_source(self, provider: str, env: str | None = None) -> str | None:
        """``env`` or ``credentials`` when a key is configured (the key itself never leaves)."""
        env = env or KEY_ENV.get(provider)
        if env and os.environ.get(env, "").strip():
            return "env"
        stored = read_json(self.home / "credentials.json", {})
        if isinstance(stored, dict) and isinstance(stored.get(provider), str) and stored[provider].strip():
            return "credentials"
        return None

    async def listed(self) -> list[dict[str, Any]]:
        """Configured routes with their models and efforts (F26, F41)."""
        llm = self.ctx.require(LLM)
        providers = []
        for info, catalog in await llm.catalogs():
            pid = info["id"]
            keyless, env = _key_env(llm.adapter_for(pid), pid)
            source = self.key_source(pid, env)
            entry: dict[str, Any] = {
                "id": pid,
                "label": info.get("name") or pid,
                "kind": "deepseek" if pid == "deepseek-official" else "openai-compatible",
                "configured": source is not None or keyless,
            }
            if source is not None:
                entry["keySource"] = source
            entry.update(_base_url(llm.adapter_for(pid), pid))
            entry["models"] = [_model_view(m) for m in catalog]
            providers.append(entry)
        return providers

    def save(self, provider_id: str | None, body: ProviderBody) -> dict[str, Any]:
        """Check everything, then store the key and the route entry.

        Route changes take effect at the next start; a key takes effect with the next request.
        """
        pid = provider_id or body.id or ("deepseek-official" if body.kind == "deepseek" else None)
        if not pid:
            raise ApiError(422, "invalid_field", 'Field "id" is required for an OpenAI-compatible provider.')
        check_id(pid)
        entry = _route_entry(pid, body) if body.kind == "openai-compatible" else None
        if entry is not None:
            self.patch_row("llm-openai-compat", _replace_route(pid, entry))
        if body.apiKey is not None:
            self._store_key(pid, body.apiKey)
        view: dict[str, Any] = {"id": pid, "kind": body.kind, "label": body.label or pid}
        source = self.key_source(pid)
        view["configured"] = source is not None
        if source is not None:
            view["keySource"] = source
        return view

    def delete(self, provider_id: str) -> None:
        """Remove the key and the route entry."""
        check_id(provider_id)
        self._store_key(provider_id, None)
        self.patch_row("llm-openai-compat", _replace_route(provider_id, None))

    def _store_key(self, provider: str, key: str | None) -> None:
        path = self.home / "credentials.json"
        stored = read_json(path, {})
        stored = stored if isinstance(stored, dict) else {}
        if key is None or not key.strip():
            stored.pop(provider, None)
        else:
            stored[provider] = key.strip()
        write_json(path, stored)

    def patch_row(self, row_id: str, edit: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """Rewrite the config of ``row_id``'s op in the profile's ``patch.yml`` (other ops kept; atomic).

        The new text must load back, with start-up's own loader, to exactly the ops meant; else
        nothing is written (500, logged): the next start must always be able to read the file.
        """
        import yaml

        from pydsh.kernel.compose import load_yaml
        from pydsh.kernel.errors import KernelError
        from pydsh.kernel.profiles import profile_dir

        path = profile_dir(self.profile) / "patch.yml"
        try:
            ops = load_yaml(path.read_text(encoding="utf-8"), "patch.yml") or []
        except FileNotFoundError:
            ops = []
        except (KernelError, UnicodeDecodeError):
            raise ApiError(409, "patch_unreadable", "The profile's patch.yml cannot be read; fix it by hand.") from None
        if not isinstance(ops, list):
            raise ApiError(409, "patch_unreadable", "The profile's patch.yml is not a list of operations.")
        op = next((o for o in ops if isinstance(o, dict) and o.get("id") == row_id and "config" in o), None)
        if op is None:
            op = {"id": row_id, "config": {}}
            ops.append(op)
        op["config"] = edit(dict(op.get("config") or {}))
        text = yaml.safe_dump(ops, sort_keys=False, allow_unicode=True)
        if load_yaml(text, "patch.yml") != ops:
            log.error("refused to write a patch.yml that does not load back as written: %r", ops)
            raise ApiError(
                500, "patch_unwritable", "The new patch.yml would not read back as written; nothing changed."
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, text)


def _route_entry(pid: str, body: ProviderBody) -> dict[str, Any]:
    """The ``llm-openai-compat`` route entry of ``body``, checked against the route schema (else 422)."""
    from pydsh.llm.openai_compat import ProviderConfig

    if not body.baseUrl:
        raise ApiError(422, "invalid_field", 'Field "baseUrl" is required for an OpenAI-compatible provider.')
    entry: dict[str, Any] = {"id": pid, "baseURL": body.baseUrl}
    if body.label:
        entry["name"] = body.label
    if body.models:
        entry["models"] = [_model_entry(m) for m in body.models]
        efforts = list(dict.fromkeys(e for m in body.models for e in m.efforts))
        if efforts:
            entry["reasoning"] = {"efforts": efforts}
    try:
        ProviderConfig.model_validate(entry)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = {"baseURL": "baseUrl", "name": "label"}.get(str(error["loc"][0]), str(error["loc"][0]))
        reason = str(error["msg"]).removeprefix("Value error, ")
        raise ApiError(422, "invalid_field", f'Field "{field}": {reason}.') from None
    return escaped(entry)  # type: ignore[no-any-return]


def _replace_route(pid: str, entry: dict[str, Any] | None) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The edit of the ``llm-openai-compat`` config that drops route ``pid`` and appends ``entry``."""

    def edit(config: dict[str, Any]) -> dict[str, Any]:
        rows = [r for r in config.get("providers") or [] if not (isinstance(r, dict) and r.get("id") == pid)]
        return {**config, "providers": rows if entry is None else [*rows, entry]}

    return edit


def _key_env(adapter: Any, provider: str) -> tuple[bool, str | None]:
    """``(works without a key, the key's environment variable)`` of a route, from its adapter's config."""
    routes = getattr(adapter, "providers", None)
    if isinstance(routes, dict) and provider in routes:
        env = getattr(routes[provider], "apiKeyEnv", None)
        return env is None, env
    config = getattr(adapter, "config", None)
    env = getattr(config, "apiKeyEnv", None)
    if isinstance(env, str):
        return False, env
    return True, None


def _base_url(adapter: Any, provider: str) -> dict[str, str]:
    """``{baseUrl, baseUrlEnv?}``: the address a route's requests go to, and the environment variable that set
    it, so the Edit form shows what is in effect (``{}`` for adapters without one, such as scripted ones)."""
    routes = getattr(adapter, "providers", None)
    if isinstance(routes, dict) and provider in routes:
        return {"baseUrl": str(routes[provider].baseURL)}
    base = getattr(adapter, "base_url", None)
    if not isinstance(base, str):
        return {}
    env = getattr(adapter, "base_url_env", None)
    return {"baseUrl": base, "baseUrlEnv": env} if isinstance(env, str) else {"baseUrl": base}


def _model_view(info: ModelInfo) -> dict[str, Any]:
    out: dict[str, Any] = {"id": info["id"], "label": info.get("name") or info["id"]}
    window = (info.get("context") or {}).get("contextWindow")
    if window:
        out["contextWindow"] = window
    reasoning = info.get("reasoning")
    out["efforts"] = [e["id"] for e in reasoning["efforts"]] if reasoning else []
    if reasoning and reasoning.get("defaultEffort"):
        out["defaultEffort"] = reasoning["defaultEffort"]
    return out


def _model_entry(model: ProviderModel) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": model.id}
    if model.label:
        entry["name"] = model.label
    if model.contextWindow:
        entry["contextWindow"] = model.contextWindow
    return entry
