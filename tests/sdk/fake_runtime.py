"""A misbehaving stand-in runtime for client tests: ``python -m tests.sdk.fake_runtime MODE``.

Modes: ``exit`` (complain on stderr, exit 3), ``silent`` (never answer), ``error`` (stderr line,
then an ``initialize`` error), ``array`` (``initialize`` answers ``[]``), ``message-id`` (a numeric
``messageId``), ``turn-end`` (a run whose ``turn/end`` kind is a number). ``shutdown`` is answered
in every mode that answers.
"""

from __future__ import annotations

import json
import sys
from typing import Any

INFO = {"serverInfo": {"name": "fake", "version": "0"}}


def send(frame: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **frame}) + "\n")
    sys.stdout.flush()


def note(method: str, params: dict[str, Any]) -> None:
    send({"method": method, "params": params})


def answer(mode: str, request: dict[str, Any]) -> None:
    rid, method, params = request["id"], request["method"], request.get("params") or {}
    if method == "shutdown":
        send({"id": rid, "result": {}})
        sys.exit(0)
    if method == "initialize":
        if mode == "error":
            print("fake: refusing to start", file=sys.stderr, flush=True)
            send({"id": rid, "error": {"code": -32603, "message": "no thanks"}})
        else:
            send({"id": rid, "result": [] if mode == "array" else INFO})
    elif method == "session/prompt" and mode == "message-id":
        send({"id": rid, "result": {"messageId": 5}})
    elif method == "session/prompt":
        sid = params["sessionId"]
        send({"id": rid, "result": {"messageId": "m1"}})
        receipt = {"type": "agent/inbox/spliced", "seq": 0, "time": 0, "data": {"inserted": [{"id": "m1"}]}}
        note("session.event", {"sessionId": sid, "event": receipt})
        end = {"type": "turn/end", "seq": 1, "time": 0, "data": {"turn": 1, "reason": {"kind": 3}}}
        note("session.event", {"sessionId": sid, "event": end})
        note("session.status", {"sessionId": sid, "status": "idle"})


def main() -> None:
    mode = sys.argv[1]
    if mode == "exit":
        print("fake: boom", file=sys.stderr, flush=True)
        sys.exit(3)
    for line in sys.stdin:
        request = json.loads(line)
        if mode != "silent":
            answer(mode, request)


if __name__ == "__main__":
    main()
