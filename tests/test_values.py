"""The records made for every message set their fields by position (values.fill): each
keyword argument must land in the field of its name."""

from __future__ import annotations

import inspect

import pytest

from mailfilter.campaign import Sending
from mailfilter.features import Features
from mailfilter.fingerprint import Fingerprint
from mailfilter.message import Attachment, Message


@pytest.mark.parametrize("cls", [Message, Attachment, Fingerprint, Features, Sending])
def test_each_argument_lands_in_its_own_field(cls: type) -> None:
    """Catches an ``__init__`` whose ``fill`` call lists its values in another order than
    ``__slots__`` (Message's sender stored as its subject, say): the analysis would be
    made of the wrong fields with no error."""
    names = list(inspect.signature(cls).parameters)
    given = {name: object() for name in names}
    record = cls(**given)
    for name, value in given.items():
        slot = name if name in cls._fields else f"_{name}"
        assert getattr(record, slot) is value, f"{cls.__name__}.{name}"
    assert sorted(cls._slots) == sorted(n if n in cls._fields else f"_{n}" for n in names)
