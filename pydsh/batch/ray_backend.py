"""The Ray backend: each task a Ray task (one CPU), run where Ray places it; the only module importing Ray.

A task runs :func:`pydsh.batch.worker.run_task` on its node, in the Ray worker process (one task at a
time per worker, so its ``DSH_HOME`` lease holds). When the batch's output directory is visible on the
node (one machine, or a shared filesystem) the task works there, so a task whose node was lost is
retried by Ray (``max_retries``) and resumes from its log; otherwise it works in a directory of the
node's own and its session log comes back with its result. The shared route gate is a named actor.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import tempfile
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import ray
import ray.exceptions

from pydsh.batch.errors import BatchError
from pydsh.batch.worker import Job, Paths, Report, run_task

NAMESPACE = "pydsh-batch"
MARKER_FILE = ".batch-id"
"""Holds the batch's random id in the output directory; a node that reads the same id there shares it."""
FORWARDED = ("DEEPSEEK_", "OPENAI_", "DSH_PERMISSION_MODE", "PYDSH_")
"""Environment variables (by prefix) every task gets from the submitting process: keys, routes, modes."""
RETRIES = 2
"""How often Ray runs a task again after its worker or node was lost."""
CONNECT_TIMEOUT_S = 3.0
DEFAULT_PORT = 6379


@ray.remote(num_cpus=0)
class GateActor:
    """The routes' shared pauses for one batch (epoch seconds each route opens again)."""

    def __init__(self) -> None:
        self.until: dict[str, float] = {}

    def opens_at(self, route: str) -> float:
        return self.until.get(route, 0.0)

    def pause_until(self, route: str, until: float) -> None:
        self.until[route] = max(until, self.until.get(route, 0.0))


class RayGate:
    """The ``batch-route-gate`` store over the batch's :class:`GateActor`."""

    def __init__(self, name: str) -> None:
        self.actor = ray.get_actor(name, namespace=NAMESPACE)

    async def opens_at(self, route: str) -> float:
        until: float = await self.actor.opens_at.remote(route)
        return until

    async def pause_until(self, route: str, until: float) -> None:
        await self.actor.pause_until.remote(route, until)


def run_on_node(data: dict[str, Any], token: str) -> dict[str, Any]:
    """A task on its node: in the batch's directory when the node shares it, else staged and shipped back."""
    job = Job.of(data)
    out = Path(job.root).parents[1]
    shared = (out / MARKER_FILE).is_file() and (out / MARKER_FILE).read_text() == token
    if not shared:
        job.root = str(Path(tempfile.gettempdir()) / f"pydsh-batch-{token}" / "tasks" / Path(job.root).name)
        job.user_home = None
    record = asyncio.run(run_task(job))
    if not shared:
        record["files"] = gathered(Paths(job.root))
        shutil.rmtree(job.root, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.removedirs(Path(job.root).parent)
    return record


def gathered(paths: Paths) -> dict[str, bytes]:
    """The session logs of a staged task, by path relative to its directory."""
    sessions = paths.home / "sessions"
    found = sessions.rglob("session.v4.jsonl*") if sessions.is_dir() else ()
    return {str(p.relative_to(paths.root)): p.read_bytes() for p in found if p.is_file()}


def check_reachable(address: str) -> None:
    """Fail fast on an address nothing listens at (Ray itself would retry for minutes)."""
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    host, port = parts.hostname, parts.port or DEFAULT_PORT
    if not host:
        raise BatchError(f"--ray {address}: not an address (use auto, HOST:PORT or ray://HOST:PORT)")
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise BatchError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None


def forwarded_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(FORWARDED)}


class RayBackend:
    """Submits each job as a Ray task and waits for its record; ``stop`` cancels them."""

    name = "ray"

    def __init__(self, address: str, out: Path) -> None:
        self.started = connect(address)
        self.token = uuid.uuid4().hex
        out.mkdir(parents=True, exist_ok=True)
        (out / MARKER_FILE).write_text(self.token)
        actor_name = f"gate-{self.token}"
        self.actor = GateActor.options(name=actor_name, namespace=NAMESPACE).remote()  # type: ignore[attr-defined]
        self.gate: dict[str, Any] = {"store": "ray", "actor": actor_name}
        self.remote = ray.remote(num_cpus=1, max_retries=RETRIES)(run_on_node).options(
            runtime_env={"env_vars": forwarded_env()}
        )
        self._running: set[Any] = set()

    @property
    def capacity(self) -> int:
        """Tasks the cluster runs at once: its CPUs."""
        resources: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call]
        return max(1, int(resources.get("CPU", 1)))

    async def run(self, job: Job, report: Report) -> dict[str, Any] | None:
        ref = self.remote.remote(job.to_json(), self.token)
        self._running.add(ref)
        report({"state": "submitted"})
        try:
            record: dict[str, Any] = await ref
        except ray.exceptions.TaskCancelledError:
            return None
        except ray.exceptions.RayError as exc:
            message = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
            return {"id": job.task["id"], "status": "error", "error": f"Ray: {message.strip()}"}
        finally:
            self._running.discard(ref)
        return unpack(record, Paths(job.root))

    def stop(self) -> None:
        for ref in list(self._running):
            ray.cancel(ref)

    def kill(self) -> None:
        for ref in list(self._running):
            ray.cancel(ref, force=True)

    async def close(self) -> None:
        """Remove the gate actor; shut down a Ray instance this batch started."""
        ray.kill(self.actor)
        if self.started:
            ray.shutdown()


def connect(address: str) -> bool:
    """Join the cluster (``auto``: the running one, else a new local instance); whether we started Ray."""
    if ray.is_initialized():
        return False
    if address != "auto":
        check_reachable(address)
    try:
        ray.init(address=None if address == "auto" else address, namespace=NAMESPACE, log_to_driver=False)
    except Exception as exc:
        line = next((part for part in str(exc).splitlines() if part.strip()), type(exc).__name__)
        raise BatchError(f"cannot connect to Ray at {address}: {line.strip()}") from None
    return True


def unpack(record: dict[str, Any], paths: Paths) -> dict[str, Any]:
    """A staged task's shipped files written under its directory here, and its paths made local."""
    files: dict[str, bytes] = record.pop("files", None) or {}
    for relative, data in files.items():
        target = paths.root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    if files:
        record["log"] = paths.session_log(record["id"])
        record["workspace"] = None
    return record
