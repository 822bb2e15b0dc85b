"""Security rules of spec 12 §2: token exchange, signed cookie, Host/Origin/content-type guard, headers."""

from __future__ import annotations

import httpx

from pydsh.apps.web.auth import CookieSigner, allowed_hosts, load_secret
from pydsh.apps.web.guard import CSP
from tests.apps.web.conftest import JSON, Web


async def test_no_cookie_is_401_on_the_api_and_both_streams(web: Web) -> None:
    async with httpx.AsyncClient(base_url=web.server.base) as anonymous:
        for path in ("/api/sessions", "/api/events", "/api/sessions/x/stream", "/api/info"):
            response = await anonymous.get(path)
            assert response.status_code == 401, path
            assert response.json()["error"]["code"] == "unauthorized"
        page = await anonymous.get("/")
        assert page.status_code == 401
        assert "pydsh web" in page.text


async def test_wrong_token_is_401_and_never_echoed(web: Web) -> None:  # the rig's token is spent
    async with httpx.AsyncClient(base_url=web.server.base) as anonymous:
        response = await anonymous.get("/?token=wrong-token-value")
    assert response.status_code == 401
    assert "wrong-token-value" not in response.text
    assert web.server.token not in response.text
    assert "set-cookie" not in response.headers


async def test_token_exchange_sets_a_strict_http_only_cookie_and_redirects(unsigned: Web) -> None:
    fresh = unsigned.client
    response = await fresh.get(f"/?token={unsigned.server.token}")
    assert response.status_code == 303
    assert response.headers["location"] == "/"
    cookie = response.headers["set-cookie"]
    port = unsigned.server.sock.getsockname()[1]
    assert cookie.startswith(f"pydsh-auth-{port}=v1.")
    for flag in ("HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=2592000"):
        assert flag in cookie
    assert "Secure" not in cookie
    assert unsigned.server.token not in cookie
    page = await fresh.get("/")
    assert page.status_code == 200
    assert "/static/v0.1.0/app.js" in page.text
    assert page.headers["cache-control"] == "no-store"
    assert (await fresh.get("/api/sessions")).status_code == 200


async def test_the_token_signs_in_once(unsigned: Web) -> None:
    token = unsigned.server.token
    assert (await unsigned.client.get(f"/?token={token}")).status_code == 303
    again = await unsigned.client.get(f"/?token={token}")
    assert again.status_code == 303 and "set-cookie" not in again.headers  # signed in already: on to /
    async with httpx.AsyncClient(base_url=unsigned.server.base) as other_browser:
        spent = await other_browser.get(f"/?token={token}")
        assert spent.status_code == 401
        assert "set-cookie" not in spent.headers and token not in spent.text
        assert "already used" in spent.text and "single-use" in spent.text
        assert (await other_browser.get("/api/sessions")).status_code == 401


async def test_the_sign_in_page_says_what_the_token_is(unsigned: Web) -> None:
    page = await unsigned.client.get("/")
    assert page.status_code == 401
    text = " ".join(page.text.split())
    assert "single-use sign-in token" in text and "30 days" in text and "restart" in text
    assert "already used" not in text


async def test_a_non_ascii_cookie_is_401(web: Web) -> None:
    name = web.server.state.signer.name
    async with httpx.AsyncClient(base_url=web.server.base) as stranger:
        for value in ("v1.é.x", "v1.abc.ü", "ä"):
            cookie = {"Cookie": f"{name}={value}".encode()}
            response = await stranger.get("/api/sessions", headers=cookie)
            assert response.status_code == 401, value
            assert response.json()["error"]["code"] == "unauthorized"
            assert (await stranger.get("/", headers=cookie)).status_code == 401


async def test_a_flipped_character_or_another_ports_audience_is_401(web: Web) -> None:
    name = web.server.state.signer.name
    value = web.client.cookies[name]
    body, mac = value.rsplit(".", 1)
    flipped = body + "." + ("A" if mac[0] != "A" else "B") + mac[1:]
    async with httpx.AsyncClient(base_url=web.server.base, cookies={name: flipped}) as forged:
        assert (await forged.get("/api/sessions")).status_code == 401
    port = web.server.sock.getsockname()[1]
    signer = CookieSigner(load_secret(web.server.state.home), port)
    other = signer.mint(f"127.0.0.1:{port + 1}")
    async with httpx.AsyncClient(base_url=web.server.base, cookies={name: other}) as elsewhere:
        assert (await elsewhere.get("/api/sessions")).status_code == 401
    expired = signer.mint(f"127.0.0.1:{port}", now_ms=0)
    async with httpx.AsyncClient(base_url=web.server.base, cookies={name: expired}) as stale:
        assert (await stale.get("/api/sessions")).status_code == 401


async def test_foreign_host_is_421_and_the_server_keeps_serving(web: Web) -> None:
    response = await web.client.get("/api/sessions", headers={"Host": "evil.example"})
    assert response.status_code == 421
    assert response.json()["error"]["code"] == "misdirected_request"
    port = web.server.sock.getsockname()[1]
    ok = await web.client.get("/api/sessions", headers={"Host": f"localhost:{port}"})
    assert ok.status_code == 401  # the cookie was minted for 127.0.0.1, a different audience
    assert (await web.client.get("/api/sessions")).status_code == 200


async def test_foreign_origin_and_non_json_writes_are_403(web: Web) -> None:
    body = '{"cwd": "."}'
    evil = await web.client.post("/api/sessions", content=body, headers={**JSON, "Origin": "http://evil.example"})
    assert evil.status_code == 403
    assert evil.json()["error"]["code"] == "bad_origin"
    plain = await web.client.post("/api/sessions", content=body, headers={"Content-Type": "text/plain"})
    assert plain.status_code == 403
    assert plain.json()["error"]["code"] == "bad_content_type"
    same = await web.client.post(
        "/api/client-errors", content='{"message": "x"}', headers={**JSON, "Origin": web.server.base}
    )
    assert same.status_code == 204


async def test_every_response_carries_the_security_headers(web: Web) -> None:
    for response in (
        await web.client.get("/"),
        await web.client.get("/api/info"),
        await web.client.get("/static/v0.1.0/app.js"),
        await web.client.get("/api/sessions", headers={"Host": "evil.example"}),
        await web.client.get("/api/nope"),
    ):
        assert response.headers["content-security-policy"] == CSP
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"
    assert (await web.client.get("/api/info")).headers["cache-control"] == "no-store"


async def test_static_files_are_public_versioned_and_typed(web: Web) -> None:
    async with httpx.AsyncClient(base_url=web.server.base) as anonymous:
        script = await anonymous.get("/static/v0.1.0/app.js")
        assert script.status_code == 200
        assert script.headers["content-type"] == "text/javascript; charset=utf-8"
        assert script.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert (await anonymous.get("/static/v0.1.0/style.css")).headers["content-type"].startswith("text/css")
        assert (await anonymous.get("/static/v0.0.9/app.js")).status_code == 404
        assert (await anonymous.get("/static/v0.1.0/../conftest.py")).status_code == 404
        assert (await anonymous.get("/static/v0.1.0/%2e%2e/index.html")).status_code == 404
        assert (await anonymous.get("/favicon.ico")).status_code in (200, 204)


def test_allowed_hosts_cover_loopback_names_and_trusted_ones() -> None:
    hosts = allowed_hosts("127.0.0.1", 3080, ("box.lan",))
    assert {"127.0.0.1:3080", "localhost:3080", "[::1]:3080", "box.lan", "box.lan:3080"} <= hosts
    assert "evil.example:3080" not in hosts
    assert "[::1]:3080" in allowed_hosts("::1", 3080, ())


def test_the_secret_is_private_and_stable(tmp_path) -> None:  # type: ignore[no-untyped-def]
    first = load_secret(tmp_path)
    assert load_secret(tmp_path) == first
    assert (tmp_path / "web" / "secret").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "web").stat().st_mode & 0o777 == 0o700
