"""``pydsh --profile NAME --dump-config-schema``: a JSON Schema that accepts what pydsh loads and names what it refuses."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from pydsh.kernel.compose import SHIPPED
from tests.apps.test_cli import pydsh
from tests.sdk.reference import REFERENCE, needs_reference

PROFILES = ("sdk", "sdk-minimal", "headless", "web", "acp")


def schema_of(profile: str, cwd: Path, *extra: str) -> dict[str, Any]:
    result = pydsh("--profile", profile, *extra, "--dump-config-schema", cwd=cwd)
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def patch_validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """A validator of patch files, from the document's ``patchSchema``."""
    return jsonschema.Draft202012Validator({"$ref": schema["x-pydsh"]["patchSchema"], "$defs": schema["$defs"]})


@pytest.mark.parametrize("profile", PROFILES)
def test_the_schema_accepts_the_composed_tree_and_every_shipped_bundle(tmp_path: Path, profile: str) -> None:
    schema = schema_of(profile, tmp_path)
    jsonschema.Draft202012Validator.check_schema(schema)
    tree = yaml.safe_load(pydsh("--profile", profile, "--dump-config", cwd=tmp_path).stdout)
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(tree)) == []
    rows = schema["x-pydsh"]["rows"]
    assert [row["id"] for row in rows if "/config/" not in row["path"]] == [row["id"] for row in tree]
    assert schema["x-pydsh"]["complete"] is True and schema["x-pydsh"]["diagnostics"] == []
    validator = patch_validator(schema)
    for bundle in sorted(SHIPPED.glob("*.yml")):
        assert list(validator.iter_errors(yaml.safe_load(bundle.read_text()))) == [], bundle.name


def test_a_patch_is_checked_against_the_config_of_the_row_it_targets(tmp_path: Path) -> None:
    patch = tmp_path / "extra.yml"
    patch.write_text("- insert: [{id: replay, name: llm-replay, config: {scripts: [{text: hi}]}}]\n")
    validator = patch_validator(schema_of("headless", tmp_path, "--patch", str(patch)))
    good = [
        {"id": "session-title", "config": {"fallbackMaxWords": "${env:WORDS:-5}"}},
        {"id": "replay", "disabled": "${env:OFF:-false}"},
        {"insert": [{"id": "more", "name": "tool-bash"}], "after": "tool-fs"},
        {"id": "tool-todo", "remove": True},
    ]
    assert list(validator.iter_errors(good)) == []
    typo = [{"id": "session-title", "config": {"fallbackMaxWord": 5}}]
    assert [e.message for e in validator.iter_errors(typo)] == [
        "Additional properties are not allowed ('fallbackMaxWord' was unexpected)"
    ]
    wrong_type = [{"insert": [{"id": "x", "name": "session-title", "config": {"maxTitleBytes": "many"}}]}]
    assert len(list(validator.iter_errors(wrong_type))) == 1
    assert len(list(validator.iter_errors([{"id": "tool-bash", "colour": "red"}]))) == 1


@needs_reference
def test_the_schema_has_the_reference_documents_shape(tmp_path: Path) -> None:
    ours = schema_of("sdk", tmp_path)
    reference = json.loads(
        subprocess.run(
            [REFERENCE, "--profile", "sdk", "--dump-config-schema"], cwd=tmp_path, capture_output=True, timeout=60
        ).stdout
    )
    assert {k for k in reference if not k.startswith("x-")} == {k for k in ours if not k.startswith("x-")}
    assert (ours["$schema"], ours["type"]) == (reference["$schema"], reference["type"])
    assert set(reference["x-cordis"]["entries"][0]) == set(ours["x-pydsh"]["rows"][0])
    assert reference["x-cordis"]["patchSchema"] == "#/$defs/patchList" == ours["x-pydsh"]["patchSchema"]
