"""Small records as plain ``__slots__`` classes instead of dataclasses.

A dataclass writes its ``__init__``, ``__eq__``, ``__repr__`` (and ``__hash__``) as source
and compiles them in every process that imports it (0.4–0.85 ms a class, paid at every
start of the pipe filter); these classes write their ``__init__`` by hand and share the
rest from :class:`Fields` (settable attributes, like a dataclass) or :class:`Value`
(immutable and hashable, like a frozen one), which read the fields from ``__slots__``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from itertools import repeat
from operator import call


class Fields:
    """Equality, repr and pickling by the fields named in ``__slots__`` (in order; a slot
    whose name starts with ``_`` is a private cache, none of these).  Attributes can be set;
    no hash (like a dataclass's: equal records that change cannot be keys)."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _slots: tuple[str, ...] = ()        # every slot, private ones too, in fill's order
    _setters: tuple[Callable[[object, object], None], ...] = ()     # theirs, in order
    __hash__ = None     # type: ignore[assignment]

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        owners = [(klass, name) for klass in reversed(cls.__mro__)
                  for name in klass.__dict__.get("__slots__", ())]
        cls._slots = tuple(name for _, name in owners)
        cls._fields = tuple(name for name in cls._slots if not name.startswith("_"))
        cls._setters = tuple(klass.__dict__[name].__set__ for klass, name in owners)

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()      # type: ignore[attr-defined]

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({fields})"

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return type(self), self._values()


class Value(Fields):
    """A :class:`Fields` that is immutable, and hashable by its fields: no attribute can be
    set after ``__init__`` (which sets them with :func:`init`)."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot delete {name}")

    def __hash__(self) -> int:
        return hash(self._values())


_set = object.__setattr__


def init(instance: Value, **values: object) -> None:
    """Set the fields of a :class:`Value` being made (its ``__init__`` calls this)."""
    _drain(map(_set, repeat(instance), values, values.values()))


def fill(instance: Value, *values: object) -> None:
    """:func:`init` by position: every slot of ``instance``'s class (private ones too), in
    ``__slots__`` order.  For the records made for every message (a keyword dict and a
    Python loop cost twice this one C loop; tests/test_values.py checks the order).  Each
    slot is set by its own descriptor: no look-up of its name (a quarter faster)."""
    _drain(map(call, instance._setters, repeat(instance), values))


_drain = deque(maxlen=0).extend        # runs an iterator to its end in C


class derived:  # noqa: N801 - used as a decorator, like functools.cached_property
    """A value worked out from an instance's fields on first use and then kept in its
    ``__dict__`` (later reads find it there: plain attribute reads).

    ``functools.cached_property`` without its lock: before Python 3.12 it takes an RLock
    at every first use, which cost more than most of a pair's facts themselves (a Pair
    is made for every stored candidate a check weighs; a weigh 42 -> 40 us).  For
    instances one thread makes and reads (a :class:`mailfilter.rules.pair.Pair`)."""

    def __init__(self, function) -> None:  # noqa: ANN001 - any method of one argument
        self.function = function
        self.name = function.__name__
        self.__doc__ = function.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: object, owner: type | None = None):  # noqa: ANN204
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.function(instance)
        return value


def replace(value, **changes):  # noqa: ANN001, ANN201 - a Fields, a Value or a dataclass
    """A copy of ``value`` with some fields changed: ``dataclasses.replace`` for these
    classes (and for dataclasses, which it hands to it)."""
    if not isinstance(value, Fields):
        import dataclasses
        return dataclasses.replace(value, **changes)
    fields = {name: getattr(value, name) for name in value._fields}
    unknown = set(changes) - set(fields)
    if unknown:
        raise TypeError(f"{type(value).__name__} has no field {', '.join(sorted(unknown))}")
    fields.update(changes)
    return type(value)(**fields)
