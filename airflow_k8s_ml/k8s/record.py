"""``Record``: a small frozen value type whose classes cost nothing to define.

Why not ``NamedTuple`` or a frozen dataclass: both generate and compile code for every class they define
(``__new__``/``__init__``, ``__eq__``, ``__repr__``, field accessors), and the modules that define our
argument and fact types are imported on every DAG parse, in a fresh dag-processor fork, where that costs
0.3-0.5 ms per class (``bench/parse_cost.py``). A ``Record`` subclass only declares annotated fields (with
optional defaults, like a dataclass); :meth:`Record.__init_subclass__` records their names and one shared
``__init__`` binds positional and keyword arguments to them. Type checkers see it as a frozen dataclass
(``dataclass_transform``).

Instances are read-only, compare and hash by type and field values, iterate over their values in field order
(so ``a, b = record`` and ``all(record)`` work as with a named tuple) and offer ``_fields``, ``_asdict()``
and ``_replace()``. Pure, stdlib only (part of the shared core, which any layer may import).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any, ClassVar, dataclass_transform

__all__ = ["Record"]

_CLASS_VAR = ("ClassVar", "typing.ClassVar")


@dataclass_transform(frozen_default=True)
class Record:
    """Base of a frozen value type: subclass it and annotate the fields (defaults after required ones)."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()
    _defaults: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        annotations = inspect.get_annotations(cls)  # this class's own, as strings (postponed evaluation)
        own = [name for name, hint in annotations.items() if not str(hint).startswith(_CLASS_VAR)]
        defaults = dict(cls._defaults)
        for name in own:
            if name in cls.__dict__:
                defaults[name] = cls.__dict__[name]
            elif defaults:
                raise TypeError(f"{cls.__name__}: field {name!r} without a default follows a default")
        cls._fields = (*cls._fields, *(name for name in own if name not in cls._fields))
        cls._defaults = defaults

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        fields = self._fields
        if len(args) > len(fields):
            raise TypeError(f"{type(self).__name__} takes {len(fields)} arguments, got {len(args)}")
        values = dict(zip(fields, args, strict=False))
        for name, value in kwargs.items():
            if name not in fields:
                raise TypeError(f"{type(self).__name__} got an unexpected argument {name!r}")
            if name in values:
                raise TypeError(f"{type(self).__name__} got multiple values for argument {name!r}")
            values[name] = value
        for name in fields:
            if name in values:
                object.__setattr__(self, name, values[name])
            elif name in self._defaults:
                object.__setattr__(self, name, self._defaults[name])
            else:
                raise TypeError(f"{type(self).__name__} missing required argument {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __iter__(self) -> Iterator[Any]:
        return (getattr(self, name) for name in self._fields)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash((type(self), tuple(self)))

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({values})"

    def _asdict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._fields}

    def _replace(self, **changes: Any) -> Any:
        return type(self)(**{**self._asdict(), **changes})
