"""Small value types for the metadata path, without `dataclasses`.

Importing `dataclasses` (which imports `inspect`, `ast`, `dis` and `tokenize`) and running its
decorator on the classes of the header path made the first `read_header` of a process several
times slower (docs/architecture.md, "Start-up"; docs/benchmarks.md, "Measured choices in the
code"). A `Record`
subclass names its fields in ``__slots__`` and writes its own ``__init__``; this base gives it
the ``repr``, equality and pickling a dataclass would.
"""
from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["Record", "FrozenRecord"]

_R = TypeVar("_R", bound="Record")


class Record:
    """Fields in ``__slots__`` order; ``_hidden`` fields are left out of ``repr`` and ``==``."""

    __slots__ = ()
    _hidden: tuple[str, ...] = ()

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """Every field, in declaration order (the ``dataclasses.fields`` of a record)."""
        return tuple(cls.__slots__)

    def replace(self: _R, **changes: Any) -> _R:
        """A copy with ``changes`` to some fields (``dataclasses.replace``: through ``__init__``,
        so its checks run again)."""
        names = self.field_names()
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {unknown[0]!r}")
        return type(self)(**{f: changes[f] if f in changes else getattr(self, f) for f in names})

    def _shown(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f) for f in self.field_names() if f not in self._hidden)

    def __repr__(self) -> str:
        body = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.field_names() if f not in self._hidden)
        return f"{type(self).__name__}({body})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._shown() == other._shown()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # mutable, like a dataclass with eq=True

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), tuple(getattr(self, f) for f in self.field_names())


class FrozenRecord(Record):
    """A `Record` whose fields cannot be reassigned (``__init__`` sets them with
    ``object.__setattr__``); hashable when its fields are."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of a {type(self).__name__}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of a {type(self).__name__}")

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self._shown())
