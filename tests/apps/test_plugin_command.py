"""``pydsh plugin add|remove|list`` with pip replaced by a stub, and bundles that degrade alone (01 §15)."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pydsh.apps import plugins
from pydsh.apps.cli import main
from pydsh.kernel.profiles import compose_profile, ensure_profile

REPO = Path(__file__).resolve().parents[2]
REAL_RUN_PIP = plugins.run_pip
BUNDLE = "- insert: [{id: demo-plug, name: demo-plug}]\n"


@dataclass
class FakeDist:
    name: str
    version: str = "1.0"
    bundles: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    """Files of the import package ``demo_plug``, relative to it."""


@dataclass
class FakePip:
    """Stands in for ``python -m pip``: installs fake distributions into a directory on ``sys.path``."""

    site: Path
    index: dict[str, FakeDist]
    exit_code: int = 0
    calls: list[list[str]] = field(default_factory=list)

    def __call__(self, args: list[str]) -> int:
        self.calls.append(args)
        if self.exit_code:
            return self.exit_code
        if args[0] == "install":
            report, requirements = Path(args[2]), args[3:]
            items = [self.install(self.index[r]) for r in requirements]
            report.write_text(json.dumps({"version": "1", "install": items}))
        else:
            for name in args[2:]:
                self.uninstall(name)
        importlib.invalidate_caches()
        return 0

    def install(self, dist: FakeDist) -> dict[str, object]:
        self.uninstall(dist.name)
        info = self.site / f"{dist.name.replace('-', '_')}-{dist.version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist.name}\nVersion: {dist.version}\n")
        eps = "".join(f"{b} = demo_plug:{b}.yml\n" for b in dist.bundles)
        (info / "entry_points.txt").write_text(f"[pydsh.bundles]\n{eps}" if eps else "")
        package = self.site / "demo_plug"
        package.mkdir(exist_ok=True)
        for bundle, text in dist.bundles.items():
            (package / f"{bundle}.yml").write_text(text)
        for rel, text in dist.files.items():
            (package / rel).write_text(text)
        return {"requested": True, "metadata": {"name": dist.name, "version": dist.version}}

    def uninstall(self, name: str) -> None:
        for info in self.site.glob(f"{name.replace('-', '_')}-*.dist-info"):
            shutil.rmtree(info)
        shutil.rmtree(self.site / "demo_plug", ignore_errors=True)


@pytest.fixture
def pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakePip:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(REPO)]))
    fake = FakePip(site, {"./demo": FakeDist("demo-plug", bundles={"demo-plug": BUNDLE})})
    monkeypatch.setattr(plugins, "run_pip", fake)
    yield fake
    fake.uninstall("demo-plug")
    importlib.invalidate_caches()


def profile_text(name: str = "headless") -> str:
    return (ensure_profile(name) / "profile.yml").read_text()


def test_add_list_remove(pip: FakePip, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugin", "--profile", "headless", "add", "./demo"]) == 0
    assert pip.calls[0][0:2] == ["install", "--report"] and pip.calls[0][3:] == ["./demo"]
    out, err = capsys.readouterr()
    assert out == 'added bundle "demo-plug" of demo-plug to profile "headless"; it takes effect at the next start\n'
    assert err == ""
    assert profile_text() == (
        "description: Run one task headless and print the answer.\n"
        "bundles: [base, agent-tools, headless-app, demo-plug]\n"
        "plugins:\n"
        "  demo-plug: [demo-plug]\n"
    )
    assert "demo-plug" in [r.id for r in compose_profile("headless", []).rows]
    assert main(["plugin", "--profile", "headless", "add", "./demo"]) == 0
    assert "bundles: [base, agent-tools, headless-app, demo-plug]\n" in profile_text()
    capsys.readouterr()
    assert main(["plugin", "--profile", "headless", "list"]) == 0
    assert capsys.readouterr().out == (
        "base  shipped  ok\nagent-tools  shipped  ok\nheadless-app  shipped  ok\ndemo-plug  demo-plug 1.0  ok\n"
    )
    assert main(["plugin", "--profile", "headless", "remove", "demo_plug"]) == 0
    assert pip.calls[-1] == ["uninstall", "-y", "demo-plug"]
    assert profile_text() == (
        "description: Run one task headless and print the answer.\nbundles: [base, agent-tools, headless-app]\n"
    )
    assert capsys.readouterr().out == 'removed demo-plug from profile "headless"\n'


def test_distribution_without_bundle_leaves_the_profile_unchanged(
    pip: FakePip, capsys: pytest.CaptureFixture[str]
) -> None:
    pip.index["plain"] = FakeDist("plain")
    before = profile_text()
    assert main(["plugin", "--profile", "headless", "add", "plain"]) == 0
    assert capsys.readouterr().err == (
        'pydsh: warning: plain declares no pydsh.bundles entry point; profile "headless" is unchanged\n'
    )
    assert profile_text() == before
    pip.uninstall("plain")


def test_pip_failure_and_missing_pip_leave_the_profile_unchanged(
    pip: FakePip, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = profile_text()
    pip.exit_code = 1
    assert main(["plugin", "--profile", "headless", "add", "./demo"]) == 1
    assert capsys.readouterr().err == "error: pip install failed (exit 1)\n"
    monkeypatch.setattr(plugins, "run_pip", REAL_RUN_PIP)
    monkeypatch.setattr(plugins, "find_spec", lambda name: None)
    assert main(["plugin", "--profile", "headless", "add", "./demo"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: pip is not installed in this environment") and "python -m ensurepip" in err
    assert profile_text() == before


def test_bundle_name_clashes_exit_2_and_keep_the_profile(pip: FakePip, capsys: pytest.CaptureFixture[str]) -> None:
    pip.index["./shadow"] = FakeDist("shadow", bundles={"base": BUNDLE})
    before = profile_text()
    assert main(["plugin", "--profile", "headless", "add", "./shadow"]) == 2
    assert capsys.readouterr().err == (
        'error: bundle "base" of shadow is the name of a shipped bundle; profile "headless" is unchanged '
        "(the package stays installed)\n"
    )
    assert profile_text() == before
    pip.uninstall("shadow")
    assert main(["plugin", "--profile", "headless", "add", "./demo"]) == 0
    pip.index["./rival"] = FakeDist("rival", bundles={"demo-plug": BUNDLE})
    before = profile_text()
    assert main(["plugin", "--profile", "headless", "add", "./rival"]) == 2
    assert 'error: bundle "demo-plug" of rival is already recorded for demo-plug;' in capsys.readouterr().err
    assert profile_text() == before


def test_remove_keeps_a_package_another_profile_records(pip: FakePip, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugin", "--profile", "headless", "add", "./demo"]) == 0
    assert main(["plugin", "--profile", "sdk", "add", "./demo"]) == 0
    calls = len(pip.calls)
    capsys.readouterr()
    assert main(["plugin", "--profile", "sdk", "remove", "demo-plug"]) == 0
    assert len(pip.calls) == calls
    assert capsys.readouterr().out == (
        'removed demo-plug from profile "sdk"\n'
        'demo-plug is still recorded for profile "headless"; the package stays installed\n'
    )
    assert "demo-plug" not in profile_text("sdk")
    assert main(["plugin", "--profile", "sdk", "remove", "demo-plug"]) == 2
    assert capsys.readouterr().err == (
        'error: demo-plug is not recorded for profile "sdk" (recorded: none); nothing was changed\n'
    )


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["plugin", "add", "x"], 1, "error: --profile <name> is required"),
        (["plugin", "--profile", "a", "--profile", "b", "list"], 1, "error: select a profile only once"),
        (["plugin", "--profile", "", "list"], 1, "error: --profile needs a name"),
        (["plugin", "--profile", "nonesuch", "list"], 2, 'error: unknown profile "nonesuch" (known templates: '),
        (["plugin", "--profile", "headless"], 2, "error: an action is required (add, remove or list)"),
        (["plugin", "--profile", "headless", "install", "x"], 2, 'error: unknown action "install"'),
        (["plugin", "--profile", "headless", "add"], 2, "error: add needs at least one requirement"),
        (["plugin", "--profile", "headless", "list", "x"], 2, "error: list takes no arguments"),
    ],
)
def test_usage_errors(argv: list[str], code: int, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == code
    assert capsys.readouterr().err.startswith(message)


def test_requirement_names() -> None:
    assert plugins.requirement_name("pydsh-agent-message>=0.1") == "pydsh-agent-message"
    assert plugins.requirement_name("Foo_Bar [extra] ==1") == "Foo_Bar"
    assert plugins.requirement_name("foo @ https://example.invalid/foo.tar.gz") == "foo"
    assert plugins.requirement_name("dist/foo_bar-1.0-py3-none-any.whl") == "foo_bar"
    assert plugins.requirement_name("./plugins/agent-message") is None
    assert plugins.requirement_name("https://example.invalid/archive.tar.gz") is None


# -- a missing or broken bundle degrades alone (01 §15.3) ----------------------------------------


def listed(profile: str, *bundles: str, plugins_map: str = "") -> None:
    path = ensure_profile(profile) / "profile.yml"
    text = path.read_text().replace("headless-app]", "headless-app, " + ", ".join(bundles) + "]")
    path.write_text(text + plugins_map)


@pytest.mark.parametrize(
    ("files", "bundle", "reason"),
    [
        ({}, None, "its bundle file demo_plug:demo-plug.yml cannot be read"),
        ({}, "- insert: [{id: x, name: y}\n", "demo_plug:demo-plug.yml: malformed YAML"),
        ({}, "{insert: []}\n", "demo_plug:demo-plug.yml is not a list of patch operations"),
        ({}, "- insert: [{id: session, name: session}]\n", 'duplicate row id "session"'),
        ({"__init__.py": "raise RuntimeError('boom')\n"}, BUNDLE, ""),
    ],
)
def test_broken_bundle_is_skipped_with_one_warning(
    pip: FakePip, files: dict[str, str], bundle: str | None, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dist = FakeDist("demo-plug", bundles={"demo-plug": bundle or ""}, files=files)
    pip.install(dist)
    if bundle is None:
        (pip.site / "demo_plug" / "demo-plug.yml").unlink()
    importlib.invalidate_caches()
    listed("headless", "demo-plug", plugins_map="plugins: {demo-plug: [demo-plug]}\n")
    comp = compose_profile("headless", [])
    ids = [r.id for r in comp.rows]
    assert "session" in ids and "headless-app" in ids
    assert main(["plugin", "--profile", "headless", "list"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    if not reason:
        assert comp.warnings == [] and "demo-plug" in ids and last == "demo-plug  demo-plug 1.0  ok"
        assert "demo_plug" not in sys.modules
        return
    assert len(comp.warnings) == 1
    assert comp.warnings[0].startswith('bundle "demo-plug" skipped: ')
    assert "distribution demo-plug 1.0" in comp.warnings[0] and reason in comp.warnings[0]
    assert "demo-plug" not in ids
    assert last.startswith("demo-plug  demo-plug 1.0  broken: ") and reason in last


def test_missing_and_unknown_bundles_in_list(capsys: pytest.CaptureFixture[str]) -> None:
    listed("headless", "gone", "stray", plugins_map="plugins: {pydsh-gone: [gone]}\n")
    assert main(["plugin", "--profile", "headless", "list"]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == ["gone  pydsh-gone  missing", "stray  -  missing"]
    comp = compose_profile("headless", [])
    assert comp.warnings == [
        'bundle "gone" skipped: distribution pydsh-gone is not installed (reinstall it, or run '
        "pydsh plugin --profile headless remove pydsh-gone)",
        'bundle "stray" skipped: no shipped bundle or installed distribution provides it',
    ]


def test_distribution_that_stopped_declaring_its_bundle(pip: FakePip) -> None:
    pip.install(FakeDist("demo-plug"))
    importlib.invalidate_caches()
    listed("headless", "demo-plug", plugins_map="plugins: {demo-plug: [demo-plug]}\n")
    assert compose_profile("headless", []).warnings == [
        'bundle "demo-plug" skipped: distribution demo-plug 1.0 declares no pydsh.bundles entry point named '
        "demo-plug (run pydsh plugin --profile headless remove demo-plug)"
    ]


@pytest.mark.parametrize(
    ("module", "reason"),
    [
        ("raise RuntimeError('boom')\n", "RuntimeError: boom"),
        ("import sys\nsys.exit(7)\n", "SystemExit: called sys.exit(7)"),
    ],
    ids=["raises", "calls-sys-exit"],
)
def test_plugin_failing_on_import_fails_its_row_only(pip: FakePip, tmp_path: Path, module: str, reason: str) -> None:
    dist = FakeDist("demo-plug", bundles={"demo-plug": BUNDLE}, files={"broken.py": module})
    pip.install(dist)
    info = next(pip.site.glob("demo_plug-*.dist-info"))
    (info / "entry_points.txt").write_text(
        "[pydsh.bundles]\ndemo-plug = demo_plug:demo-plug.yml\n[pydsh.plugins]\ndemo-plug = demo_plug.broken\n"
    )
    listed("headless", "demo-plug", plugins_map="plugins: {demo-plug: [demo-plug]}\n")
    replay = tmp_path / "replay.yml"
    replay.write_text(
        "- {id: llm-deepseek, disabled: true}\n"
        "- insert: [{id: llm-replay, name: llm-replay, config: {scripts: [{text: fine}]}}]\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "pydsh", "headless", "--patch", str(replay), "hello"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "fine\n"
    problems = [line for line in result.stderr.splitlines() if line.startswith("pydsh:")]
    assert problems == [
        'pydsh: ERROR pydsh.kernel: plugin row "demo-plug" (demo-plug) from plugin bundle demo-plug '
        f"(distribution demo-plug 1.0) failed: KernelError: PLUGIN_NOT_FOUND: demo-plug ({reason}) <- {reason}"
    ]


# -- nothing outside a distribution's package is read -------------------------------------------


def test_a_bundle_name_that_is_a_path_is_refused_by_add(pip: FakePip, capsys: pytest.CaptureFixture[str]) -> None:
    pip.index["./sneaky"] = FakeDist("sneaky", bundles={"../../sneaky": BUNDLE})
    before = profile_text()
    assert main(["plugin", "--profile", "headless", "add", "./sneaky"]) == 2
    assert capsys.readouterr().err == (
        'error: bundle "../../sneaky" of sneaky is not a valid bundle name (letters, digits, ".", "_" and "-", '
        'starting with a letter or digit); profile "headless" is unchanged (the package stays installed)\n'
    )
    assert profile_text() == before
    pip.uninstall("sneaky")


def test_a_listed_bundle_name_that_is_a_path_is_skipped_unread(
    pip: FakePip, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pydsh.kernel.compose import SHIPPED

    (tmp_path / "outside.yml").write_text("- insert: [{id: outside, name: outside}]\n")
    name = os.path.relpath(tmp_path / "outside", SHIPPED)
    listed("headless", name, plugins_map=f"plugins: {{sneaky: ['{name}']}}\n")
    comp = compose_profile("headless", [])
    assert "outside" not in [r.id for r in comp.rows]
    assert comp.warnings == [
        f'bundle "{name}" skipped: not a valid bundle name (letters, digits, ".", "_" and "-", starting with a '
        "letter or digit); nothing was read for it"
    ]
    assert main(["plugin", "--profile", "headless", "list"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith(f'"{name}"  sneaky  broken: not a valid bundle name')


@pytest.mark.parametrize("how", ["dotted", "absolute", "symlink"])
def test_a_bundle_file_outside_its_package_is_skipped_unread(pip: FakePip, tmp_path: Path, how: str) -> None:
    outside = tmp_path / "outside.yml"
    outside.write_text("- insert: [{id: outside, name: outside}]\n")
    pip.install(FakeDist("demo-plug", bundles={"demo-plug": BUNDLE}))
    resource = {"dotted": "../../outside.yml", "absolute": str(outside), "symlink": "demo-plug.yml"}[how]
    if how == "symlink":
        (pip.site / "demo_plug" / "demo-plug.yml").unlink()
        (pip.site / "demo_plug" / "demo-plug.yml").symlink_to(outside)
    info = next(pip.site.glob("demo_plug-*.dist-info"))
    (info / "entry_points.txt").write_text(f"[pydsh.bundles]\ndemo-plug = demo_plug:{resource}\n")
    importlib.invalidate_caches()
    listed("headless", "demo-plug", plugins_map="plugins: {demo-plug: [demo-plug]}\n")
    comp = compose_profile("headless", [])
    assert "outside" not in [r.id for r in comp.rows] and "demo-plug" not in [r.id for r in comp.rows]
    assert comp.warnings == [
        f'bundle "demo-plug" skipped: distribution demo-plug 1.0: its bundle file demo_plug:{resource} is '
        "outside package demo_plug; nothing outside a distribution's package is read"
    ]


# -- pydsh's own plugin distributions are added by name, offline ---------------------------------


@pytest.mark.parametrize(
    ("spelling", "distribution"),
    [
        ("agent-message", "pydsh-agent-message"),
        ("dsh-agent-message", "pydsh-agent-message"),
        ("@deepseek-ai/dsh-agent-message", "pydsh-agent-message"),
        ("pydsh-agent-message", "pydsh-agent-message"),
        ("Agent_Message", "pydsh-agent-message"),
        ("team-models", "pydsh-team-models"),
        ("dsh-team-models", "pydsh-team-models"),
        ("@deepseek-ai/dsh-team-models", "pydsh-team-models"),
        ("agent-messages", None),
        ("pydsh-agent-message>=0.1", None),
        ("dsh-tool-bash", None),
    ],
)
def test_the_spellings_of_pydsh_s_own_plugins(spelling: str, distribution: str | None) -> None:
    assert plugins.first_party(spelling) == distribution


def test_a_path_named_like_a_shipped_plugin_is_a_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "team-models").mkdir()
    assert plugins.first_party("team-models") is None


@pytest.fixture
def shipped(pip: FakePip, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A first-party ``demo-plug`` (short name ``demo``) whose wheel ships inside pydsh."""
    wheels = tmp_path / "shipped_plugins"
    wheels.mkdir()
    wheel = wheels / "demo_plug-1.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    monkeypatch.setattr(plugins, "SHIPPED_WHEELS", wheels)
    monkeypatch.setattr(plugins, "FIRST_PARTY", {"demo-plug": "demo"})
    pip.index[str(wheel)] = FakeDist("demo-plug", bundles={"demo-plug": BUNDLE})
    return wheel


@pytest.mark.parametrize("spelling", ["demo", "dsh-demo", "@deepseek-ai/dsh-demo"])
def test_a_shipped_plugin_is_added_by_name_from_its_shipped_wheel(
    pip: FakePip, shipped: Path, spelling: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plugin", "--profile", "web", "add", spelling]) == 0
    assert pip.calls[0][3:] == [str(shipped)]
    out, err = capsys.readouterr()
    assert err.startswith(f"pydsh: {spelling} is pydsh's own demo-plug: installing {shipped}\n")
    assert out == (
        'added bundle "demo-plug" of demo-plug to profile "web"; a running pydsh web loads it at once if its plugins '
        "allow it, else it takes effect at the next start\n"
    )
    assert "plugins:\n  demo-plug: [demo-plug]\n" in profile_text("web")
    assert main(["plugin", "--profile", "web", "remove", spelling]) == 0
    assert pip.calls[-1] == ["uninstall", "-y", "demo-plug"]
    assert "demo-plug" not in profile_text("web")


def test_from_a_checkout_a_shipped_plugin_comes_from_its_installed_copy_or_its_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plugins, "SHIPPED_WHEELS", tmp_path / "not-built")
    assert plugins.shipped_requirement("pydsh-agent-message") == "pydsh-agent-message"
    monkeypatch.setattr(plugins, "FIRST_PARTY", {"pydsh-absent": "agent-message"})
    assert plugins.shipped_requirement("pydsh-absent") == str(REPO / "plugins" / "agent-message")
    monkeypatch.setattr(plugins, "CHECKOUT_PLUGINS", tmp_path / "no-checkout")
    assert plugins.shipped_requirement("pydsh-absent") == "pydsh-absent"
