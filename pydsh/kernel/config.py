"""Config models: pydantic's class syntax, checked in plain code, with pydantic only for the hard cases.

Plugin ``Config`` classes and wire params subclass :class:`BaseModel` from here exactly as they would
pydantic's. Well-formed input of the plain kinds (exact ``bool``/``int``/``float``/``str``, ``None``,
``Literal``, lists, dicts, nested models, numeric and length bounds, ``before``/``after`` validators)
is checked without importing pydantic, which would cost start-up a tenth of a second. Anything else
(input that needs coercion, a problem to report, a feature the fast path does not know) goes to the
equivalent pydantic model, built on first use, so results and error texts are pydantic's own.
"""

from __future__ import annotations

import copy
import inspect
import re
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal, TypeVar, Union, dataclass_transform, get_args, get_origin

from pydsh.kernel.errors import PydshError

__all__ = ["BaseModel", "ConfigDict", "Field", "field_validator", "model_validator"]

T = TypeVar("T", bound="BaseModel")
_MISSING: Any = object()
CONSTRAINTS = frozenset({"gt", "ge", "lt", "le", "min_length", "max_length", "pattern"})
FIELD_KEYS = CONSTRAINTS | {"default", "default_factory", "description"}
CONFIG_KEYS = frozenset({"extra", "frozen", "defer_build"})
_EXACT = (str, bool, int, float, type(None))
FIELDS_SET = "__fields_set__"
BOOL_WORDS = {w: False for w in ("0", "off", "f", "false", "n", "no")} | {
    w: True for w in ("1", "on", "t", "true", "y", "yes")
}
_DIGITS = re.compile("-?[0-9]+")


class _Slow(PydshError):
    """The fast path cannot decide: let pydantic validate."""


def ConfigDict(**settings: Any) -> dict[str, Any]:
    """Model settings (``extra``, ``frozen``, ...), as pydantic's ``ConfigDict``."""
    return dict(settings)


class FieldInfo:
    """What ``Field(...)`` declared: a default or factory and constraints."""

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self.kwargs = kwargs


def Field(default: Any = _MISSING, **kwargs: Any) -> Any:
    """A field's default and constraints, as pydantic's ``Field``."""
    if default is not _MISSING:
        kwargs["default"] = default
    return FieldInfo(kwargs)


class _Validator:
    """A validator declared with :func:`field_validator` or :func:`model_validator`."""

    def __init__(self, target: Any, fields: tuple[str, ...], mode: str, kwargs: dict[str, Any]) -> None:
        self.target = target
        self.fields = fields
        self.mode = mode
        self.kwargs = kwargs

    @property
    def function(self) -> Callable[..., Any]:
        fn = self.target.__func__ if isinstance(self.target, (classmethod, staticmethod)) else self.target
        return typing.cast(Callable[..., Any], fn)

    def to_pydantic(self) -> Any:
        import pydantic

        if self.fields:
            return pydantic.field_validator(*self.fields, mode=self.mode, **self.kwargs)(self.target)  # type: ignore[call-overload]
        return pydantic.model_validator(mode=self.mode)(self.target)  # type: ignore[call-overload]


def field_validator(*fields: str, mode: str = "after", **kwargs: Any) -> Callable[[Any], Any]:
    """Declare a field validator, as pydantic's ``field_validator``."""
    return lambda target: _Validator(target, fields, mode, kwargs)


def model_validator(*, mode: str) -> Callable[[Any], Any]:
    """Declare a model validator, as pydantic's ``model_validator``."""
    return lambda target: _Validator(target, (), mode, {})


class _Field:
    """One field of a model: its type, default and constraints, and its field validators."""

    __slots__ = ("hint", "default", "factory", "constraints", "before", "after")

    def __init__(self, hint: Any, declared: Any) -> None:
        if get_origin(hint) is Annotated:
            raise _Slow
        self.hint = hint
        kwargs = declared.kwargs if isinstance(declared, FieldInfo) else {"default": declared}
        if set(kwargs) - FIELD_KEYS:
            raise _Slow
        self.default = kwargs.get("default", _MISSING)
        self.factory: Callable[[], Any] | None = kwargs.get("default_factory")
        self.constraints = {k: v for k, v in kwargs.items() if k in CONSTRAINTS}
        self.before: list[Callable[..., Any]] = []
        self.after: list[Callable[..., Any]] = []

    def missing(self) -> Any:
        if self.factory is not None:
            return self.factory()
        if self.default is _MISSING:
            raise _Slow
        return copy.deepcopy(self.default) if isinstance(self.default, (list, dict, set)) else self.default


class _Spec:
    """The plain-code validator of one model class."""

    def __init__(self, cls: type[BaseModel]) -> None:
        config: dict[str, Any] = {}
        for base in reversed(cls.__mro__):
            config.update(base.__dict__.get("model_config", {}))
        if set(config) - CONFIG_KEYS or config.get("extra", "ignore") not in ("ignore", "forbid"):
            raise _Slow
        self.forbid = config.get("extra") == "forbid"
        hints = typing.get_type_hints(cls, include_extras=True)
        self.fields: dict[str, _Field] = {}
        for name, hint in hints.items():
            if get_origin(hint) is ClassVar or name.startswith("model_"):
                continue
            if name.startswith("_"):
                raise _Slow
            self.fields[name] = _Field(hint, _class_default(cls, name))
        self.before: list[Callable[..., Any]] = []
        self.after: list[Callable[..., Any]] = []
        for base in reversed(cls.__mro__):
            for value in base.__dict__.values():
                if isinstance(value, _Validator):
                    self._add(cls, value)
        if len(self.before) > 1:
            raise _Slow

    def _add(self, cls: type[BaseModel], validator: _Validator) -> None:
        if validator.mode not in ("before", "after") or validator.kwargs:
            raise _Slow
        fn = validator.function
        is_method = not isinstance(validator.target, (classmethod, staticmethod))
        if validator.fields:
            if is_method or len(inspect.signature(fn).parameters) != 2:
                raise _Slow
            for name in validator.fields:
                if name not in self.fields:
                    raise _Slow
                getattr(self.fields[name], validator.mode).append(_bind(fn, cls))
        elif validator.mode == "before":
            self.before.append(fn if isinstance(validator.target, staticmethod) else _bind(fn, cls))
        else:
            if not is_method:
                raise _Slow
            self.after.append(fn)

    def build(self, cls: type[T], data: Any) -> T:
        for fn in self.before:
            data = fn(data)
        if isinstance(data, cls) and not self.before:
            return data
        if type(data) is not dict or (self.forbid and not data.keys() <= self.fields.keys()):
            raise _Slow
        values: dict[str, Any] = {}
        given: set[str] = set()
        for name, field in self.fields.items():
            if name not in data:
                values[name] = field.missing()
                continue
            value = data[name]
            for fn in field.before:
                value = fn(value)
            value = _coerce(field.hint, value)
            if value is not None:
                _check_constraints(value, field.constraints)
            for fn in field.after:
                value = fn(value)
            values[name] = value
            given.add(name)
        instance = _new(cls, values, given)
        for fn in self.after:
            instance = fn(instance)
        return instance


def _bind(fn: Callable[..., Any], cls: type) -> Callable[..., Any]:
    return lambda value: fn(cls, value)


def _class_default(cls: type, name: str) -> Any:
    for base in cls.__mro__:
        if name in base.__dict__:
            return base.__dict__[name]
    return _MISSING


def _new(cls: type[T], values: dict[str, Any], given: set[str]) -> T:
    instance = object.__new__(cls)
    instance.__dict__.update(values)
    instance.__dict__[FIELDS_SET] = given
    return instance


def _coerce(hint: Any, value: Any) -> Any:
    """``value`` checked against ``hint`` the way pydantic would accept it unchanged (or int -> float)."""
    if hint is Any or hint is object:
        return value
    if hint in _EXACT:
        if type(value) is hint or (hint is type(None) and value is None):
            return value
        return _lax(hint, value)
    if isinstance(hint, type) and issubclass(hint, BaseModel):
        if isinstance(value, hint):
            return value
        return hint._fast(value)
    origin = get_origin(hint)
    args = get_args(hint)
    if origin is Literal:
        if any(value == a and type(value) is type(a) for a in args):
            return value
        raise _Slow
    if origin in (Union, types.UnionType):
        return _union(args, value)
    if origin is list and type(value) is list:
        return [_coerce(args[0], v) for v in value] if args else list(value)
    if origin is dict and type(value) is dict:
        if not args:
            return dict(value)
        return {_coerce(args[0], k): _coerce(args[1], v) for k, v in value.items()}
    raise _Slow


def _lax(hint: Any, value: Any) -> Any:
    """pydantic's lax conversions of the common cases: int -> float, a digit string -> int, a word -> bool."""
    if hint is float and type(value) is int:
        return float(value)
    if hint is int and type(value) is str and _DIGITS.fullmatch(value):
        return int(value)
    if hint is bool and type(value) is str and value.lower() in BOOL_WORDS:
        return BOOL_WORDS[value.lower()]
    if hint is bool and type(value) is int and value in (0, 1):
        return bool(value)
    raise _Slow


def _union(args: tuple[Any, ...], value: Any) -> Any:
    """Smart-union choice for the unambiguous cases: an exact type or literal match, else one structured member,
    else the lax conversion of the one plain kind of an optional (``float | None`` takes an int)."""
    for arg in args:
        if arg in _EXACT and (type(value) is arg or (arg is type(None) and value is None)):
            return value
        if get_origin(arg) is Literal and any(value == a and type(value) is type(a) for a in get_args(arg)):
            return value
    structured = [a for a in args if a not in _EXACT and get_origin(a) is not Literal]
    plain = [a for a in args if a in _EXACT and a is not type(None)]
    if not structured and len(plain) == 1:
        return _lax(plain[0], value)
    if len(structured) != 1:
        raise _Slow
    return _coerce(structured[0], value)


def _check_constraints(value: Any, constraints: dict[str, Any]) -> None:
    for key, bound in constraints.items():
        ok = (
            (key == "gt" and value > bound)
            or (key == "ge" and value >= bound)
            or (key == "lt" and value < bound)
            or (key == "le" and value <= bound)
            or (key == "min_length" and len(value) >= bound)
            or (key == "max_length" and len(value) <= bound)
            or (key == "pattern" and re.search(bound, value) is not None)
        )
        if not ok:
            raise _Slow


def _dump(value: Any, exclude_none: bool) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_none=exclude_none)
    if isinstance(value, list):
        return [_dump(v, exclude_none) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v, exclude_none) for k, v in value.items()}
    return value


@dataclass_transform(kw_only_default=True, field_specifiers=(Field,))
class BaseModel:
    """A validated model with pydantic's behaviour and without pydantic on the common path."""

    model_config: ClassVar[dict[str, Any]] = {}

    def __init__(self, **data: Any) -> None:
        validated = type(self).model_validate(data)
        self.__dict__.update(validated.__dict__)

    @property
    def model_fields_set(self) -> set[str]:
        """The fields the input set (as opposed to defaults)."""
        return typing.cast(set[str], self.__dict__[FIELDS_SET])

    @classmethod
    def model_validate(cls, obj: Any) -> typing.Self:
        """``obj`` validated: in plain code when it can be, else by the pydantic model (its errors raised)."""
        try:
            return cls._fast(obj)
        except _Slow:
            pass
        return cls._adopt(cls._pydantic().model_validate(obj))

    @classmethod
    def _fast(cls, obj: Any) -> typing.Self:
        spec = _SPECS.get(cls)
        if spec is None:
            try:
                spec = _Spec(cls)
            except _Slow:
                spec = False
            _SPECS[cls] = spec
        if spec is False:
            raise _Slow
        try:
            return spec.build(cls, obj)
        except (ValueError, AssertionError):
            raise _Slow from None

    @classmethod
    def _pydantic(cls) -> Any:
        """The equivalent pydantic model class, built on first use."""
        model = _PYDANTIC.get(cls)
        if model is None:
            model = _PYDANTIC[cls] = _pydantic_model(cls)
        return model

    @classmethod
    def _adopt(cls, model: Any) -> typing.Self:
        """A pydantic model instance as an instance of ``cls`` (nested models converted too)."""
        values = {name: _adopted(getattr(model, name)) for name in type(model).model_fields}
        return _new(cls, values, set(model.model_fields_set))

    def model_dump(self, *, exclude_none: bool = False) -> dict[str, Any]:
        """The fields as plain data, nested models as dicts."""
        out = {name: _dump(getattr(self, name), exclude_none) for name in self._field_names()}
        return {k: v for k, v in out.items() if v is not None} if exclude_none else out

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> typing.Self:
        """A copy with ``update`` laid over, unvalidated (as pydantic's ``model_copy``)."""
        values = {n: getattr(self, n) for n in self._field_names()}
        if deep:
            values = copy.deepcopy(values)
        return _new(type(self), values | (update or {}), self.model_fields_set | set(update or ()))

    def _field_names(self) -> list[str]:
        return [n for n in self.__dict__ if n != FIELDS_SET]

    def __setattr__(self, name: str, value: Any) -> None:
        if type(self)._setting("frozen"):
            raise TypeError(f'"{type(self).__name__}" is frozen: cannot set {name}')
        if name not in self.__dict__:
            raise ValueError(f'"{type(self).__name__}" object has no field "{name}"')
        self.__dict__[name] = value
        self.model_fields_set.add(name)

    @classmethod
    def _setting(cls, key: str) -> Any:
        """One model setting, inherited settings included."""
        for base in cls.__mro__:
            if key in base.__dict__.get("model_config", {}):
                return base.__dict__["model_config"][key]
        return None

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self._field_names())

    def __hash__(self) -> int:
        if not type(self)._setting("frozen"):
            raise TypeError(f"unhashable type: '{type(self).__name__}'")
        return hash((type(self), *(getattr(self, n) for n in self._field_names())))

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._field_names())
        return f"{type(self).__name__}({fields})"


def _adopted(value: Any) -> Any:
    shim = getattr(type(value), "__pydsh_model__", None)
    if shim is not None:
        return shim._adopt(value)
    if isinstance(value, list):
        return [_adopted(v) for v in value]
    if isinstance(value, dict):
        return {k: _adopted(v) for k, v in value.items()}
    return value


_SPECS: dict[type, _Spec | Literal[False]] = {}
_PYDANTIC: dict[type, Any] = {}
SKIPPED = frozenset({"__dict__", "__weakref__", "__annotations__"})


def _pydantic_model(cls: type[BaseModel]) -> Any:
    """Build the pydantic model equivalent to ``cls``: same fields, defaults, settings and validators."""
    import pydantic

    bases = tuple(
        pydantic.BaseModel if b is BaseModel else (b._pydantic() if issubclass(b, BaseModel) else b)
        for b in cls.__bases__
    )
    hints = typing.get_type_hints(cls, include_extras=True)
    own = inspect.get_annotations(cls)
    namespace: dict[str, Any] = {"__annotations__": {n: _realized(hints[n]) for n in own}}
    namespace |= {key: _pydantic_value(key, value) for key, value in cls.__dict__.items() if key not in SKIPPED}
    metaclass: Any = type(pydantic.BaseModel)
    model = metaclass(cls.__name__, bases, namespace)
    model.__pydsh_model__ = cls
    return model


def _pydantic_value(key: str, value: Any) -> Any:
    """A class attribute of a model as the pydantic model declares it."""
    import pydantic

    if isinstance(value, FieldInfo):
        return pydantic.Field(**value.kwargs)
    if isinstance(value, _Validator):
        return value.to_pydantic()
    if key == "model_config":
        return pydantic.ConfigDict(**value)  # type: ignore[typeddict-item]
    return value


def _realized(hint: Any) -> Any:
    """``hint`` with every model of this module replaced by its pydantic model."""
    if isinstance(hint, type) and issubclass(hint, BaseModel):
        return hint._pydantic()
    args = get_args(hint)
    if not args or get_origin(hint) is Literal:
        return hint
    realized = tuple(_realized(a) for a in args)
    if realized == args:
        return hint
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return Union[realized]  # noqa: UP007 - built at run time from a tuple
    if isinstance(hint, types.GenericAlias):
        return types.GenericAlias(origin, realized)
    return hint.copy_with(realized)
