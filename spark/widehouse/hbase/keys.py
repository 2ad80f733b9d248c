"""Salted row keys of the HBase day tables: ``<salt>|<yyyymmdd>|<key>``.

``salt = crc32(key text, UTF-8) mod buckets`` (zlib's CRC-32, the same as Spark SQL's ``crc32``;
never Python's ``hash()``, which is seeded per process), zero-padded to the width of the largest
bucket number (16 buckets: ``00`` .. ``15``). The key text of a ``long`` key is its decimal form.
A bucket's rows for a day are the prefix ``<salt>|<yyyymmdd>|``; the table is pre-split at
``01``, ``02``, ... so every bucket is its own region and the extract scans buckets in parallel.
"""

from __future__ import annotations

import datetime as dt
import zlib
from collections.abc import Iterable

from widehouse.errors import ConfigError

SEPARATOR = "|"
MAX_BUCKETS = 1000


def check_buckets(buckets: int) -> int:
    if isinstance(buckets, bool) or not isinstance(buckets, int) or not 1 <= buckets <= MAX_BUCKETS:
        raise ConfigError(f"salt buckets {buckets!r} must be an integer between 1 and {MAX_BUCKETS}")
    return buckets


def salt_width(buckets: int) -> int:
    """Digits of a salt: those of the largest bucket number (``buckets - 1``)."""
    return len(str(check_buckets(buckets) - 1))


def key_text(key: int | str) -> str:
    """The text of a key as it appears in the row key (and is hashed)."""
    if isinstance(key, bool):
        raise ConfigError(f"row key {key!r} is a boolean, not a key")
    text = str(key)
    if not text or SEPARATOR in text:
        raise ConfigError(f"row key {text!r} is empty or contains {SEPARATOR!r}")
    return text


def salt_of(key: int | str, buckets: int) -> int:
    """The salt bucket of a key: crc32 of its text mod ``buckets``."""
    return zlib.crc32(key_text(key).encode("utf-8")) % buckets


def day_text(day: dt.date) -> str:
    return f"{day:%Y%m%d}"


def salt_text(bucket: int, buckets: int) -> str:
    return f"{bucket:0{salt_width(buckets)}d}"


def row_key(key: int | str, day: dt.date, buckets: int) -> bytes:
    """``<salt>|<yyyymmdd>|<key>`` as bytes."""
    return salted_row_key(key, day, buckets)[1]


def salted_row_key(key: int | str, day: dt.date, buckets: int) -> tuple[int, bytes]:
    """The salt bucket of a key and its row key (one CRC-32)."""
    bucket = salt_of(key, buckets)
    salt = salt_text(bucket, buckets)
    return bucket, f"{salt}{SEPARATOR}{day_text(day)}{SEPARATOR}{key_text(key)}".encode()


def salted_row_keys(keys: Iterable[int | str], day: dt.date, buckets: int) -> list[tuple[int, bytes]]:
    """:func:`salted_row_key` of many keys of one day (the day and salt texts made once)."""
    middle = f"{SEPARATOR}{day_text(day)}{SEPARATOR}"
    salts = [salt_text(bucket, buckets) for bucket in range(buckets)]
    crc32 = zlib.crc32
    out: list[tuple[int, bytes]] = []
    for key in keys:
        text = key_text(key)
        bucket = crc32(text.encode("utf-8")) % buckets
        out.append((bucket, f"{salts[bucket]}{middle}{text}".encode()))
    return out


def bucket_prefix(bucket: int, day: dt.date, buckets: int) -> bytes:
    """The row-key prefix of one bucket's rows for one day."""
    if not 0 <= bucket < buckets:
        raise ConfigError(f"salt bucket {bucket} is not in 0..{buckets - 1}")
    return f"{salt_text(bucket, buckets)}{SEPARATOR}{day_text(day)}{SEPARATOR}".encode()


def key_of(row: bytes) -> str:
    """The key text of a row key (what follows the second separator)."""
    parts = row.decode("utf-8").split(SEPARATOR, 2)
    if len(parts) != 3:
        raise ConfigError(f"row key {row!r} is not <salt>|<yyyymmdd>|<key>")
    return parts[2]


def split_keys(buckets: int) -> list[bytes]:
    """Region boundaries of a table pre-split on the buckets: ``01``, ``02``, ... (none for 1 bucket)."""
    return [salt_text(i, buckets).encode() for i in range(1, check_buckets(buckets))]
