"""Config models checked in plain code agree with pydantic: same values, same errors, no pydantic on the fast path."""

from __future__ import annotations

import subprocess
import sys
from typing import Annotated, Any, Literal

import pydantic
import pytest

from pydsh.kernel.config import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydsh.kernel.errors import KernelError
from pydsh.kernel.plugin import PluginInfo, validate_config


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    size: int | None = Field(default=None, gt=0)


class Outer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    flag: bool = False
    count: int = Field(default=3, ge=1)
    ratio: float = Field(default=0.5, gt=0, le=1)
    mode: Literal["a", "b"] | None = None
    depth: int | Literal["managed"] | None = None
    names: list[str] = Field(default_factory=list)
    inners: list[Inner] | None = None
    extra: dict[str, Any] = Field(default_factory=dict)
    label: str = Field(default="x", pattern=r"^[a-z]+$")
    weight: float | None = None

    @field_validator("label")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value == "reserved":
            raise ValueError("label is reserved")
        return value

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, raw: Any) -> Any:
        if isinstance(raw, dict) and "old" in raw:
            raise ValueError("old is no longer supported")
        return raw

    @model_validator(mode="after")
    def _coherent(self) -> Outer:
        if self.mode == "b" and not self.names:
            raise ValueError("mode b needs names")
        return self


class Loose(BaseModel):
    value: int = 0


GOOD: list[dict[str, Any]] = [
    {},
    {"flag": True, "count": 7, "ratio": 1, "mode": "a", "depth": 2},
    {"flag": "false", "count": "12", "depth": "managed", "names": ["p", "q"], "mode": "b"},
    {"flag": "Yes", "count": "0012", "ratio": 0.25, "label": "abc"},
    {"inners": [{"id": "m", "size": 4}, {"id": "n"}], "extra": {"k": [1, {"v": None}]}},
    {"count": "+5", "ratio": "0.5", "flag": 1},
    {"weight": 1},
    {"weight": None},
]
BAD: list[Any] = [
    {"unknown": 1},
    {"count": 0},
    {"count": "five"},
    {"flag": "maybe"},
    {"ratio": 2},
    {"mode": "c"},
    {"label": "UPPER"},
    {"label": "reserved"},
    {"old": True},
    {"mode": "b"},
    {"inners": [{"size": 1}]},
    {"inners": [{"id": "m", "size": 0}]},
    {"names": "p"},
    {"weight": "heavy"},
    [1, 2],
]


@pytest.mark.parametrize("raw", GOOD)
def test_valid_input_gives_what_pydantic_gives(raw: dict[str, Any]) -> None:
    ours = Outer.model_validate(raw)
    theirs = Outer._pydantic().model_validate(raw)
    assert isinstance(ours, Outer)
    assert ours.model_dump() == theirs.model_dump()
    assert ours.model_fields_set == theirs.model_fields_set
    assert all(isinstance(inner, Inner) for inner in ours.inners or [])


@pytest.mark.parametrize("raw", BAD)
def test_invalid_input_raises_pydantics_errors(raw: Any) -> None:
    with pytest.raises(pydantic.ValidationError) as ours:
        Outer.model_validate(raw)
    with pytest.raises(pydantic.ValidationError) as theirs:
        Outer._pydantic().model_validate(raw)
    assert _brief(ours.value) == _brief(theirs.value)


def _brief(exc: pydantic.ValidationError) -> list[tuple[Any, ...]]:
    return [(e["type"], e["loc"], e["msg"], e["input"]) for e in exc.errors()]


def test_extra_keys_are_dropped_unless_forbidden() -> None:
    assert Loose.model_validate({"value": 2, "other": 1}).model_dump() == {"value": 2}


def test_instances_behave_like_pydantic_models() -> None:
    first = Outer(count=4, inners=[{"id": "m"}])  # type: ignore[list-item]
    assert first == Outer.model_validate({"count": 4, "inners": [{"id": "m"}]})
    assert hash(first.inners[0]) == hash(Inner(id="m"))  # type: ignore[index]
    assert first.model_dump(exclude_none=True)["inners"] == [{"id": "m"}]
    assert first.model_copy(update={"count": 9}).count == 9
    assert repr(Inner(id="m")) == "Inner(id='m', size=None)"
    with pytest.raises(TypeError):
        first.count = 5  # type: ignore[misc]
    loose = Loose()
    loose.value = 3
    assert loose.value == 3 and loose.model_fields_set == {"value"}
    assert Outer().names is not Outer().names


def test_kernel_reports_the_same_config_error_text() -> None:
    info = PluginInfo(name="demo", target=object(), config_model=Outer)
    with pytest.raises(KernelError) as exc:
        validate_config("row", info, {"count": 0, "old_key": 1})
    assert exc.value.detail == (
        'row "row" (demo): count: Input should be greater than or equal to 1; old_key: Extra inputs are not permitted'
    )


def test_well_formed_config_does_not_import_pydantic() -> None:
    code = (
        "import sys\n"
        "from pydsh.kernel.plugin import resolve_plugin, validate_config\n"
        "info = resolve_plugin('llm-deepseek')\n"
        "config = validate_config('llm', info, {'maxTokens': '64', 'models': [{'id': 'm', 'contextWindow': 9}]})\n"
        "assert config.maxTokens == 64 and config.models[0].contextWindow == 9\n"
        "print(sorted(m for m in sys.modules if m.startswith('pydantic')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_shipped_presets_validate_without_pydantic() -> None:
    """An ``order: 1`` in a preset (``float | None``) is pydantic's lax int → float, taken on the fast path."""
    code = (
        "import sys\n"
        "from pydsh.agent.presets import PresetConfig\n"
        "config = PresetConfig.model_validate({'id': 'standard', 'order': 1, 'plugins': [{'id': 'persona'}]})\n"
        "assert config.order == 1.0 and type(config.order) is float\n"
        "print(sorted(m for m in sys.modules if m.startswith('pydantic')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


class Annotatedly(BaseModel):
    size: Annotated[int, pydantic.Field(ge=1)] = 1


def test_a_feature_the_fast_path_does_not_know_goes_to_pydantic() -> None:
    assert Annotatedly.model_validate({"size": 3}).size == 3
    with pytest.raises(pydantic.ValidationError, match="greater than or equal to 1"):
        Annotatedly.model_validate({"size": 0})
