"""A baseline run's samples per kind, as version 4 of the file stores them: one string
per kind, the hexadecimal of little-endian IEEE 754 doubles aligned with the kind's ids
(16 digits a value), NaN for no sample.  Version 3 wrote base64; it is read as it is.

A 20-run baseline of 10,000 tests holds 200,000 samples.  As JSON numbers they are
200,000 Python floats once parsed (6 MB in a pytest run, two thirds of what reading the
baseline cost) and most of a comparison's parse time at 100,000 tests; as one string
per column they parse like any string, and are decoded only when a comparison needs
the samples themselves (numpy reads the bytes as they are).  The summary beside them
stays plain numbers: what a person reads in a baseline is a test's median and peak.

Hexadecimal, not base64: a third longer, but ``binascii`` decodes it four times as fast
(20 ms against 85 ms for the 22 MB of a 20-run baseline of 100,000 tests, the largest
single step of ``pytest-accel compare`` there; docs/benchmarks.md).
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterator, Mapping, MutableMapping
from itertools import repeat
from math import isnan, nan
from operator import ge
from typing import TYPE_CHECKING

from pytest_accel.fields import MAX_SECONDS

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

Values = list[float | None]

_NAN_BITS = 0x7FF8000000000000  # the NaN this module writes
_MAX_BITS = array("d", [MAX_SECONDS]).tobytes()  # compared as integers below
_LITTLE = sys.byteorder == "little"
_DOUBLE = struct.Struct("<d")


def encode(columns: Columns, kind: str) -> str:
    """A kind's values as the file stores them (hexadecimal): the bytes read, if the run
    still holds them, else its list (None: no sample; trailing ones left out)."""
    raw = columns.raw(kind)
    return encode_values(columns[kind]) if raw is None else raw.hex()


def encode_values(values: Values) -> str:
    """Values as the file stores a column (hexadecimal; trailing Nones left out)."""
    end = len(values)
    while end and values[end - 1] is None:
        end -= 1
    doubles = array("d", [nan if v is None else v for v in values[:end]])
    if not _LITTLE:
        doubles.byteswap()
    return doubles.tobytes().hex()


HEX, BASE64 = "hexadecimal", "base64"  # version 4's columns, and version 3's


def decode(text: str, encoding: str = HEX) -> bytes:
    """The little-endian doubles of a column, from ``HEX`` or ``BASE64``; ValueError if
    ``text`` is not that, or not whole doubles."""
    import binascii

    try:
        if encoding == BASE64:
            import base64

            raw = base64.b64decode(text, validate=True)
        else:
            raw = binascii.a2b_hex(text)  # strict: no whitespace, an even length
    except (binascii.Error, ValueError) as exc:  # ValueError: a character beyond ASCII
        raise ValueError(f"not {encoding} ({exc})") from None
    if len(raw) % 8:
        raise ValueError(f"{len(raw)} bytes, not a whole number of 8-byte doubles")
    return raw


def bad_sample(raw: bytes) -> int | None:
    """The index of the first value that is neither NaN nor seconds from 0 to
    MAX_SECONDS, if any.  Checked on the doubles' bit patterns as unsigned integers (a
    non-negative double's order is its bits' order), in C-level passes: the common case,
    every value fine, costs two passes over the column."""
    if "numpy" in sys.modules:  # the command line: 80 columns of 100,000 samples
        import numpy as np

        seconds = as_array(raw)
        with np.errstate(invalid="ignore"):
            bad = ~(np.isnan(seconds) | ((seconds >= 0) & (seconds <= MAX_SECONDS)))
        return int(np.argmax(bad)) if bad.any() else None
    bits = array("Q", raw)
    if not _LITTLE:
        bits.byteswap()
    limit = array("Q", _MAX_BITS)[0]
    fine = sum(map(ge, repeat(limit), bits)) + bits.count(_NAN_BITS)
    if fine == len(bits):
        return None
    # -0.0 (numpy's check takes it for 0 too) and every NaN, of either sign.
    zero_or_nan = range(0x7FF0000000000001, 0x8000000000000001)
    negative_nan = range(0xFFF0000000000001, 0x10000000000000000)
    for index, value in enumerate(bits):
        if value > limit and value not in zero_or_nan and value not in negative_nan:
            return index
    return None


def as_list(raw: bytes) -> Values:
    """The doubles as floats, NaN as None."""
    doubles = array("d", raw)
    if not _LITTLE:
        doubles.byteswap()
    return [None if isnan(v) else v for v in doubles.tolist()]


def as_array(raw: bytes) -> npt.NDArray[np.float64]:
    import numpy as np

    return np.frombuffer(raw, dtype="<f8")


class Columns(MutableMapping[str, Values]):
    """A run's values per kind: lists (None: no sample), each decoded from the file's
    bytes when first asked for.  ``raw`` gives a kind's bytes while they are what the
    run holds, so that numpy can read them without a list in between."""

    def __init__(
        self, values: Mapping[str, Values], encoded: Mapping[str, bytes] | None = None
    ) -> None:
        self._values = dict(values)
        self._encoded = dict(encoded or {})

    def __getitem__(self, kind: str) -> Values:
        values = self._values.get(kind)
        if values is None:
            values = self._values[kind] = as_list(self._encoded.pop(kind))
        return values

    def __setitem__(self, kind: str, values: Values) -> None:
        self._encoded.pop(kind, None)
        self._values[kind] = values

    def __delitem__(self, kind: str) -> None:
        if self._encoded.pop(kind, None) is None:
            del self._values[kind]

    def __iter__(self) -> Iterator[str]:
        return iter([*self._values, *self._encoded])  # reading one may decode it

    def __len__(self) -> int:
        return len(self._values) + len(self._encoded)

    def sample(self, kind: str, row: int) -> float | None:
        """One id's sample (None: none), without decoding the column."""
        raw = self._encoded.get(kind)
        if raw is None:
            values = self[kind]
            return values[row] if row < len(values) else None
        if (row + 1) * 8 > len(raw):
            return None
        (value,) = _DOUBLE.unpack_from(raw, row * 8)
        return None if isnan(value) else float(value)

    def raw(self, kind: str) -> bytes | None:
        """The kind's bytes as read, unless its list was asked for (and may have changed)."""
        return self._encoded.get(kind)
