"""The starlette application of ``pydsh web``: the page, the JSON API and the streams (spec 12 §4).

Imported only by the web app's ``run`` (never on the SDK or headless start path). Handlers are
thin: they validate the body (unknown fields are 422, sizes 413) and call the :class:`WebHub`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import mimetypes
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from pydsh import __version__
from pydsh.apps.web.bodies import (
    AnswersBody,
    ClientErrorBody,
    CreateBody,
    DecisionBody,
    EmptyBody,
    ModelBody,
    PermissionBody,
    PromptBody,
    PromptFields,
    TitleBody,
    WorkspaceBody,
    check_prompt,
    read_body,
)
from pydsh.apps.web.digest import Digest
from pydsh.apps.web.elide import for_page
from pydsh.apps.web.errors import ApiError, error_body, not_found
from pydsh.apps.web.fanout import Frame
from pydsh.apps.web.guard import Guard
from pydsh.apps.web.hub import WebHub
from pydsh.apps.web.limits import Throttle
from pydsh.apps.web.providers import ProviderBody
from pydsh.apps.web.sse import EventStream, stream_frames
from pydsh.apps.web.state import WebState
from pydsh.apps.web.team import team_view
from pydsh.apps.web.views import METER_KEYS
from pydsh.subagents.keys import SUBAGENTS

log = logging.getLogger("pydsh.web")

NUMBER = re.compile(r"-?[0-9]{1,18}")
EVENTS_LIMIT = 500
PAGE_SIZE = 50
"""Sessions per page of ``GET /api/sessions`` by default, and in the index stream's ``hello``."""
TAIL_EVENTS = 200
CONTENT_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".svg": "image/svg+xml",
    ".json": "application/json",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".txt": "text/plain; charset=utf-8",
    ".md": "text/plain; charset=utf-8",
}
SIGN_IN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>pydsh web: sign in</title></head>
<body><main><h1>Not signed in</h1>
{reason}<p>Open the address that <code>pydsh web</code> printed in its terminal. Its <code>token</code>
is a single-use sign-in token: the first visit trades it for a cookie that keeps this browser signed in
to that address for 30 days, and the page moves on to <code>/</code>, so the token leaves the address bar.
From then on the token signs nobody in, so a copy left in browser history or a terminal log is harmless.</p>
<p>To sign in another browser or another address, restart <code>pydsh web</code> and open the new
address it prints.</p>
</main></body></html>
"""
ALREADY_USED = "<p>That sign-in address was already used.</p>\n"


# -- the app -------------------------------------------------------------------------------------


def build_app(hub: WebHub, state: WebState, guard_hosts: frozenset[str], throttle: Throttle) -> Guard:
    """The guarded ASGI app of one server start."""
    api = Api(hub, state, throttle)
    routes: list[BaseRoute] = [
        Route("/", api.index),
        Route("/favicon.ico", api.favicon),
        Route("/static/{rest:path}", api.static),
        Route("/api/info", api.info),
        Route("/api/ui/panels", api.panels),
        Route("/api/known-workspaces", api.workspaces, methods=["GET", "POST"]),
        Route("/api/known-workspaces/{workspaceId}", api.remove_workspace, methods=["DELETE"]),
        Route("/api/known-workspaces/{workspaceId}/files", api.workspace_files),
        Route("/api/directories", api.directories),
        Route("/api/sessions", api.sessions, methods=["GET", "POST"]),
        Route("/api/sessions/{id}", api.session),
        Route("/api/sessions/{id}/events", api.events),
        Route("/api/sessions/{id}/stream", api.stream),
        Route("/api/sessions/{id}/prompt", api.prompt, methods=["POST"]),
        Route("/api/attachments/{attachmentId}", api.attachment),
        Route("/api/sessions/{id}/queue/{messageId}", api.unqueue, methods=["DELETE"]),
        Route("/api/sessions/{id}/cancel", api.cancel, methods=["POST"]),
        Route("/api/sessions/{id}/interrupt", api.interrupt, methods=["POST"]),
        Route("/api/sessions/{id}/permission", api.permission, methods=["PUT"]),
        Route("/api/sessions/{id}/model", api.model, methods=["PUT"]),
        Route("/api/sessions/{id}/title", api.title, methods=["PUT"]),
        Route("/api/sessions/{id}/approvals/{approvalId}", api.decide, methods=["POST"]),
        Route("/api/sessions/{id}/questions/{requestId}", api.answer, methods=["POST"]),
        Route("/api/sessions/{id}/agents", api.agents),
        Route("/api/sessions/{id}/team", api.team),
        Route("/api/sessions/{id}/messages", api.messages),
        Route("/api/sessions/{id}/log", api.log),
        Route("/api/models", api.models),
        Route("/api/providers", api.add_provider, methods=["POST"]),
        Route("/api/providers/{providerId}", api.provider, methods=["PUT", "DELETE"]),
        Route("/api/settings", api.settings, methods=["GET", "PATCH"]),
        Route("/api/client-errors", api.client_error, methods=["POST"]),
        Route("/api/events", api.index_stream),
        *state.panel_routes(),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={ApiError: _api_error, 404: _not_found, 405: _not_allowed, Exception: _internal},
    )
    app.add_middleware(GZipMiddleware, minimum_size=1024)
    return Guard(app, guard_hosts, state.signer, throttle)


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return JSONResponse(exc.body(), status_code=exc.status)


async def _not_found(request: Request, exc: Exception) -> Response:
    return JSONResponse(error_body("not_found", "No such resource."), status_code=404)


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return JSONResponse(error_body("method_not_allowed", "That method is not allowed here."), status_code=405)


async def _internal(request: Request, exc: Exception) -> Response:
    log.error("request %s %s failed", request.method, request.url.path, exc_info=exc)
    return JSONResponse(error_body("internal", "The server failed to handle the request."), status_code=500)


class Api:
    """Route handlers over one hub and the server's persistent state."""

    def __init__(self, hub: WebHub, state: WebState, throttle: Throttle) -> None:
        self.hub = hub
        self.state = state
        self.throttle = throttle

    # -- page --------------------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        """Token exchange (303 + cookie), the page for a signed-in browser, else the 401 page (S2, S4).

        The token signs in once; a browser that already holds a valid cookie is sent on to ``/``
        without spending it (a second click on the printed URL).
        """
        token = request.query_params.get("token")
        host = (request.headers.get("host") or "").lower()
        value = request.cookies.get(self.state.signer.name)
        signed_in = value is not None and self.state.signer.valid(value, host)
        if token is not None:
            if signed_in:
                return RedirectResponse("/", status_code=303, headers={"Cache-Control": "no-store"})
            outcome = self.state.sign_in.redeem(token)
            if outcome != "ok":
                return _sign_in_page(ALREADY_USED if outcome == "used" else "")
            response = RedirectResponse("/", status_code=303, headers={"Cache-Control": "no-store"})
            response.headers["set-cookie"] = self.state.signer.set_cookie(host, request.url.scheme == "https")
            return response
        if not signed_in:
            return _sign_in_page("")
        page = self.state.index_html()
        if page is None:
            log.error("the page's index.html is missing from the package")
            raise ApiError(500, "page_missing", "The page files are missing from this installation.")
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})

    async def favicon(self, request: Request) -> Response:
        path = self.state.static_file("favicon.ico") or self.state.static_file("icons.svg")
        if path is None:
            return Response(status_code=204)
        return FileResponse(path, media_type=_content_type(path), headers={"Cache-Control": "public, max-age=86400"})

    async def static(self, request: Request) -> Response:
        """``/static/v<version>/…`` from the package data, immutable; other versions are 404."""
        rest: str = request.path_params["rest"]
        prefix, _, name = rest.partition("/")
        path = self.state.static_file(name) if prefix == f"v{__version__}" else None
        if path is None:
            raise not_found("That file")
        headers = {"Cache-Control": "public, max-age=31536000, immutable"}
        return FileResponse(path, media_type=_content_type(path), headers=headers)

    # -- info ---------------------------------------------------------------------------------

    async def info(self, request: Request) -> Response:
        return JSONResponse(self.state.info())

    async def panels(self, request: Request) -> Response:
        return JSONResponse({"panels": self.state.panels()})

    async def workspaces(self, request: Request) -> Response:
        if request.method == "POST":
            body = await read_body(request, WorkspaceBody)
            workspace = self.state.add_workspace(body.path)
            self.hub.streams.index_topic.publish("", ("workspace", workspace, None))
            return JSONResponse({"workspace": workspace}, status_code=201)
        counts = await self.hub.views.workspace_counts()
        return JSONResponse({"workspaces": self.state.workspaces(counts)})

    async def remove_workspace(self, request: Request) -> Response:
        await read_body(request, EmptyBody)
        workspace_id = request.path_params["workspaceId"]
        self.state.remove_workspace(workspace_id, await self.hub.views.workspace_counts())
        self.hub.streams.index_topic.publish("", ("workspace-removed", {"workspaceId": workspace_id}, None))
        return Response(status_code=204)

    async def workspace_files(self, request: Request) -> Response:
        """``@file`` completion: files of one listed workspace whose path contains ``q`` (F29)."""
        from pydsh.apps.web.folders import find_files

        listed = self.state.workspaces(await self.hub.views.workspace_counts())
        root = next((w["path"] for w in listed if w["workspaceId"] == request.path_params["workspaceId"]), None)
        if root is None or not os.path.isdir(root):
            raise not_found("That workspace")
        query = request.query_params.get("q") or ""
        return JSONResponse(await asyncio.to_thread(find_files, root, query))

    async def directories(self, request: Request) -> Response:
        """The directory browser of "Add workspace": the folders of ``path`` (home by default), fenced (F6)."""
        from pydsh.apps.web.folders import browse

        listed = self.state.workspaces(await self.hub.views.workspace_counts(refresh=False))
        roots = [os.path.expanduser("~"), *(w["path"] for w in listed)]
        return JSONResponse(await asyncio.to_thread(browse, request.query_params.get("path"), roots))

    # -- sessions -----------------------------------------------------------------------------

    async def sessions(self, request: Request) -> Response:
        if request.method == "POST":
            return await self._create(request)
        params = request.query_params
        limit = _int(params.get("limit"), PAGE_SIZE, 1, 500)
        query = (params.get("q") or "").lower()
        page = await self.hub.views.page(limit, params.get("cursor"), params.get("workspace"), query)
        return JSONResponse(page)

    async def _create(self, request: Request) -> Response:
        body = await read_body(request, CreateBody)
        if body.prompt is not None:
            check_prompt(body.prompt)
        default_preset, default_model = self.state.new_session_defaults()
        model = body.model.model_dump(exclude_none=True) if body.model is not None else default_model
        preset = body.permissionPreset or default_preset
        if body.prompt is not None and body.prompt.images:
            from pydsh.apps.web.images import check_route

            await check_route(self.hub.ctx, model)
        agent = await self.hub.create_session(self.state.expand(body.cwd), body.agentPreset, preset, model)
        out: dict[str, Any] = {}
        if body.prompt is not None:
            p = body.prompt
            out = await self.hub.prompt(
                agent.session_id,
                p.text,
                "queue",
                p.clientMessageId,
                p.clientTimeZone,
                refs_asked=p.references,
                images=_images(p),
            )
            out.pop("queued", None)
        return JSONResponse({"session": self.hub.views.summary(agent.session), **out}, status_code=201)

    async def session(self, request: Request) -> Response:
        sid = request.path_params["id"]
        session = await self.hub.views.glance(sid)
        summary = self.hub.views.summary(session)
        subagents = self.hub.ctx.get(SUBAGENTS)
        if summary.get("parentSessionId") and subagents is not None:
            summary["name"] = await subagents.full_name(sid)
        projections = self.hub.views.projections(session)
        projections["compaction"] = await self.hub.views.compaction_budget(session)
        body = {
            "session": summary,
            "header": session.header,
            "projections": projections,
            "pending": self.hub.waiting.pending(sid, session),
            "lastSeq": session.last_seq if isinstance(session, Digest) else session.seq,
        }
        if isinstance(session, Digest):
            body["deferred"] = list(METER_KEYS)
        return JSONResponse(body)

    async def events(self, request: Request) -> Response:
        """A page of events that starts at a turn boundary: ``?before=&limit=`` or ``?tail=turns:N`` (of a stored
        session not read yet, from its last lines alone)."""
        sid = request.path_params["id"]
        params = request.query_params
        tail = params.get("tail")
        turns = None
        if tail is not None:
            kind, _, count = tail.partition(":")
            turns = _number(count)
            if kind != "turns" or turns is None or turns < 0:
                raise ApiError(422, "invalid_tail", 'tail must look like "turns:2".')
            found = await self.hub.views.tail(sid, turns, TAIL_EVENTS)
            if found is not None:
                return _page(found[0], found[2], found[1] > 0)
        session = await self.hub.views.read(sid)
        events = session.events
        if turns is not None:
            start = min(_nth_turn(events, turns), _boundary(events, len(events) - TAIL_EVENTS))
            end = len(events)
        else:
            end = _int(params.get("before"), len(events), 0, len(events))
            limit = _int(params.get("limit"), EVENTS_LIMIT, 1, 5000)
            start = _boundary(events, end - limit) if end > limit else 0
        return _page(events[start:end], session.seq, start > 0)

    async def stream(self, request: Request) -> Response:
        """The session stream (§4.3): hello, replay after ``after``/``Last-Event-ID``, then live frames."""
        sid = request.path_params["id"]
        after = _after(request)
        with contextlib.ExitStack() as held:
            held.callback(self._stream_slot(request))
            sub, live_events, inflight = self.hub.streams.subscribe(sid)
            held.callback(self.hub.streams.unsubscribe, sid, sub)
            stored = None if live_events is not None else await self.hub.views.read(sid)
            events = list(stored.events) if stored is not None else live_events or []
            hello = {
                "sessionId": sid,
                "lastSeq": events[-1]["seq"] if events else -1,
                "status": self.hub.views.status_of(sid),
                "pending": self.hub.waiting.pending(sid, stored),
            }
            replay: list[Frame] = [("hello", hello, None)]
            replay += [("session-event", for_page(e), e["seq"]) for e in events if e["seq"] > after]
            replay += [("assistant-stream", f, None) for f in inflight]
            team = team_view(self.hub, sid)
            if team is not None:
                replay.append(("team", team, None))
            return EventStream(stream_frames(replay, sub, after), held.pop_all().close)

    async def index_stream(self, request: Request) -> Response:
        with contextlib.ExitStack() as held:
            held.callback(self._stream_slot(request))
            sub = self.hub.streams.subscribe_index()
            held.callback(self.hub.streams.unsubscribe_index, sub)
            hello = await self.hub.views.page(PAGE_SIZE, None, None, "")
            workspaces = self.state.workspaces(await self.hub.views.workspace_counts(refresh=False))
            hello["sessions"] += await self.hub.views.firsts(workspaces, hello["sessions"])
            hello["workspaces"] = workspaces
            return EventStream(stream_frames([("hello", hello, None)], sub, None), held.pop_all().close)

    def _stream_slot(self, request: Request) -> Callable[[], None]:
        """One of the client's (its cookie's) stream slots, else 429/503; returns its release."""
        return self.throttle.streams.acquire(request.cookies.get(self.state.signer.name, ""))

    async def prompt(self, request: Request) -> Response:
        body = await read_body(request, PromptBody)
        check_prompt(body)
        sid = request.path_params["id"]
        out = await self.hub.prompt(
            sid,
            body.text,
            body.mode,
            body.clientMessageId,
            body.clientTimeZone,
            refs_asked=body.references,
            images=_images(body),
        )
        return JSONResponse(out, status_code=202)

    async def attachment(self, request: Request) -> Response:
        """A stored image of a message, for the chat's thumbnails."""
        from pydsh.apps.web.images import attachment

        return await asyncio.to_thread(attachment, self.hub.ctx, request)

    async def unqueue(self, request: Request) -> Response:
        await read_body(request, EmptyBody)
        await self.hub.unqueue(request.path_params["id"], request.path_params["messageId"])
        return Response(status_code=204)

    async def cancel(self, request: Request) -> Response:
        await read_body(request, EmptyBody)
        sid = request.path_params["id"]
        await self.hub.views.read(sid)
        self.hub.cancel(sid)
        return JSONResponse({"accepted": True}, status_code=202)

    async def interrupt(self, request: Request) -> Response:
        await read_body(request, EmptyBody)
        await self.hub.interrupt(request.path_params["id"])
        return JSONResponse({"accepted": True}, status_code=202)

    async def permission(self, request: Request) -> Response:
        body = await read_body(request, PermissionBody)
        agent = await self.hub.live_agent(request.path_params["id"])
        return JSONResponse({"preset": self.hub.set_permission(agent, body.preset)})

    async def model(self, request: Request) -> Response:
        body = await read_body(request, ModelBody)
        model = await self.hub.set_model(request.path_params["id"], body.model_dump(exclude_none=True))
        return JSONResponse({"model": model})

    async def title(self, request: Request) -> Response:
        body = await read_body(request, TitleBody)
        return JSONResponse({"title": await self.hub.set_title(request.path_params["id"], body.title)})

    async def decide(self, request: Request) -> Response:
        body = await read_body(request, DecisionBody)
        self.hub.waiting.decide(request.path_params["id"], request.path_params["approvalId"], body.outcome)
        return JSONResponse({"outcome": body.outcome})

    async def answer(self, request: Request) -> Response:
        body = await read_body(request, AnswersBody)
        if not body.skip and body.answers is None:
            raise ApiError(422, "invalid_field", 'Send "answers" or "skip": true.')
        raw = body.model_dump(exclude_none=True)
        result = self.hub.waiting.answer(request.path_params["id"], request.path_params["requestId"], raw)
        return JSONResponse(result)

    # -- agents, team, log --------------------------------------------------------------------

    async def agents(self, request: Request) -> Response:
        from pydsh.apps.web.agents import agent_tree

        sid = request.path_params["id"]
        await self.hub.views.read(sid)
        return JSONResponse({"root": await agent_tree(self.hub, sid)})

    async def team(self, request: Request) -> Response:
        sid = request.path_params["id"]
        await self.hub.views.read(sid)
        if not self.state.teams_composed():
            raise ApiError(404, "feature_unavailable", "Agent Teams is not composed in this profile.")
        return JSONResponse(team_view(self.hub, sid) or {"members": [], "tasks": []})

    async def messages(self, request: Request) -> Response:
        """Outgoing cross-session messages and their delivery state (404 unless agent-message is composed)."""
        from pydsh.apps.web.messages import delivery

        sid = request.path_params["id"]
        await self.hub.views.read(sid)
        if not self.state.agent_message_composed():
            raise ApiError(404, "feature_unavailable", "Cross-session messages are not composed in this profile.")
        view = await delivery(self.hub, sid)
        self.hub.streams.deliveries.note(sid, view)
        return JSONResponse(view)

    async def log(self, request: Request) -> Response:
        """The stored v4 JSONL of a session (or a ZIP of its tree with ``?tree=1``), as an attachment."""
        sid = request.path_params["id"]
        await self.hub.views.read(sid)
        if request.query_params.get("tree") == "1":
            data = await self.state.tree_zip(self.hub, sid)
            name = f"{sid}.sessions.zip"
            media = "application/zip"
        else:
            data = await self.state.log_bytes(self.hub, sid)
            name = f"{sid}.session.v4.jsonl"
            media = "application/x-ndjson"
        headers = {"Content-Disposition": f'attachment; filename="{name}"'}
        return Response(data, media_type=media, headers=headers)

    # -- models, providers, settings ----------------------------------------------------------

    async def models(self, request: Request) -> Response:
        return JSONResponse(await self.state.models())

    async def add_provider(self, request: Request) -> Response:
        body = await read_body(request, ProviderBody)
        return JSONResponse({"provider": self.state.providers.save(None, body)}, status_code=201)

    async def provider(self, request: Request) -> Response:
        provider_id = request.path_params["providerId"]
        if request.method == "DELETE":
            await read_body(request, EmptyBody)
            self.state.providers.delete(provider_id)
            return Response(status_code=204)
        body = await read_body(request, ProviderBody)
        return JSONResponse({"provider": self.state.providers.save(provider_id, body)})

    async def settings(self, request: Request) -> Response:
        from pydsh.apps.web.state import SettingsPatch

        if request.method == "PATCH":
            body = await read_body(request, SettingsPatch)
            return JSONResponse(self.state.patch_settings(body.expectedRevision, body.set))
        return JSONResponse(self.state.settings())

    async def client_error(self, request: Request) -> Response:
        body = await read_body(request, ClientErrorBody)
        self.state.client_error(body.message, body.stack)
        return Response(status_code=204)


def _page(events: list[Any], last_seq: int, more: bool) -> Response:
    """A page of ``GET /api/sessions/{id}/events``."""
    return JSONResponse(
        {
            "events": [for_page(e) for e in events],
            "firstSeq": events[0]["seq"] if events else None,
            "lastSeq": last_seq,
            "hasMore": more,
        }
    )


def _images(prompt: PromptFields) -> list[dict[str, Any]]:
    """The prompt's inline images as content blocks."""
    return [image.model_dump() for image in prompt.images or ()]


def _sign_in_page(reason: str) -> Response:
    """The 401 page: what the printed address and its token are, and how to sign in (S2)."""
    return HTMLResponse(SIGN_IN_PAGE.format(reason=reason), status_code=401, headers={"Cache-Control": "no-store"})


def _content_type(path: Path) -> str:
    suffix = path.suffix.lower()
    return CONTENT_TYPES.get(suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"


def _number(raw: str | None) -> int | None:
    """A plain decimal integer (ASCII digits, at most 18), else ``None``: ``²`` or 5,000 digits are no number."""
    return int(raw) if raw is not None and NUMBER.fullmatch(raw) else None


def _int(raw: str | None, default: int, low: int, high: int) -> int:
    value = _number(raw)
    return default if value is None else max(low, min(high, value))


def _after(request: Request) -> int:
    value = _number(request.query_params.get("after") or request.headers.get("last-event-id"))
    return -1 if value is None else value


def _boundary(events: list[Any], index: int) -> int:
    """The nearest ``turn/start`` at or before ``index`` (0 when there is none)."""
    for i in range(min(index, len(events) - 1), -1, -1):
        if events[i]["type"] == "turn/start":
            return i
    return 0


def _nth_turn(events: list[Any], n: int) -> int:
    """Index of the ``n``-th last ``turn/start`` (0 when there are fewer)."""
    seen = 0
    for i in range(len(events) - 1, -1, -1):
        if events[i]["type"] == "turn/start":
            seen += 1
            if seen == n:
                return i
    return 0
