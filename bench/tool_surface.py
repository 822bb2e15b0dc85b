"""The tools the ``sdk`` profile advertises, pydsh next to the reference runtime.

Run: python bench/tool_surface.py [--reference PATH]
Starts pydsh's SDK server (``python -m pydsh --profile sdk``) and, when its executable is given
(``--reference`` or ``PYDSH_REFERENCE_DSH``), the reference runtime, each against the loopback mock
model, sends one prompt, and reads the ``tools`` of the first model request each made. Prints both
sorted lists side by side, then the names only one side advertises.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

from pydsh.sdk.client import AsyncHarness
from pydsh.testing.mock_model_server import MockModelServer


def tool_names(body: dict[str, Any]) -> list[str]:
    """Tool names of one request body, Anthropic-Messages or chat-completions dialect."""
    names = [t.get("name") or t.get("function", {}).get("name") for t in body.get("tools") or []]
    return sorted(str(n) for n in names)


async def advertised(dsh_bin: str | None) -> list[str]:
    """The tools of the first model request of one ``sdk`` runtime (pydsh when ``dsh_bin`` is None)."""
    with tempfile.TemporaryDirectory(prefix="tool-surface-") as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        settings: dict[str, Any] = {"cwd": str(workspace), "dsh_home": str(Path(tmp) / "home"), "api_key": "sk-bench"}
        if dsh_bin is not None:
            settings["dsh_bin"] = dsh_bin
        async with MockModelServer(sequence=[{"text": "ok"}], repeat_last=True) as server:
            async with AsyncHarness(base_url=server.base_url, **settings) as harness:
                await harness.session("surface").run("hi")
            with_tools = [r["body"] for r in server.requests if isinstance(r["body"], dict) and r["body"].get("tools")]
    if not with_tools:
        raise SystemExit("no model request carried tools")
    return tool_names(with_tools[0])


def side_by_side(left: list[str], right: list[str] | None) -> list[str]:
    """Rows of both sorted lists, aligned by name so a gap shows what one side lacks."""
    if right is None:
        return [f"  {name}" for name in left]
    names = sorted(set(left) | set(right))
    width = max(len(n) for n in [*names, "pydsh"]) + 2
    rows = [f"  {'pydsh':<{width}}reference", f"  {'-' * (width - 2):<{width}}{'-' * 9}"]
    for name in names:
        rows.append(f"  {name if name in left else '':<{width}}{name if name in right else ''}")
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", default=os.environ.get("PYDSH_REFERENCE_DSH", ""))
    args = parser.parse_args()
    ours = await advertised(None)
    theirs: list[str] | None = None
    if args.reference and Path(args.reference).is_file():
        theirs = await advertised(args.reference)
    else:
        print("reference runtime not found (pass --reference or set PYDSH_REFERENCE_DSH); its column is skipped")
    print(
        f"sdk profile, first model request: pydsh {len(ours)} tools" + (f", reference {len(theirs)}" if theirs else "")
    )
    print("\n".join(side_by_side(ours, theirs)))
    if theirs is not None:
        print(f"only pydsh ({len(set(ours) - set(theirs))}): {', '.join(sorted(set(ours) - set(theirs))) or '-'}")
        print(f"only reference ({len(set(theirs) - set(ours))}): {', '.join(sorted(set(theirs) - set(ours))) or '-'}")


if __name__ == "__main__":
    asyncio.run(main())
