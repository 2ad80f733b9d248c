"""Salted row keys: stable salts (checked against CRC-32 values computed outside Python), layout,
bucket prefixes and split keys."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from widehouse.errors import ConfigError
from widehouse.hbase import keys

DAY = dt.date(2026, 11, 22)

# CRC-32 of the key text, from gzip's trailer (`printf 10000001 | gzip | tail -c8 | head -c4 | od -tu4`)
CRC32 = {
    "10000001": 2074459403,
    "10000002": 3802983601,
    "10000003": 2511068199,
    "10000004": 198134148,
    "10000005": 2093512978,
    "10000006": 3854641320,
}


@pytest.mark.parametrize(
    ("key", "buckets", "salt"),
    [
        (10000001, 16, 11),
        (10000002, 16, 1),
        (10000003, 16, 7),
        (10000004, 16, 4),
        (10000005, 16, 2),
        (10000006, 16, 8),
        (10000001, 4, 3),
        (10000005, 1000, 978),
        (10000001, 1, 0),
    ],
)
def test_salt_is_crc32_of_the_key_text_mod_buckets(key: int, buckets: int, salt: int) -> None:
    assert CRC32[str(key)] % buckets == salt  # the table above, checked by hand
    assert keys.salt_of(key, buckets) == salt
    assert keys.salt_of(str(key), buckets) == salt


def test_row_keys_by_hand() -> None:
    assert keys.row_key(10000001, DAY, 16) == b"11|20261122|10000001"
    assert keys.row_key(10000002, DAY, 16) == b"01|20261122|10000002"
    assert keys.row_key(10000005, DAY, 1000) == b"978|20261122|10000005"
    assert keys.row_key(10000004, DAY, 4) == b"0|20261122|10000004"
    assert keys.row_key(10000001, DAY, 1) == b"0|20261122|10000001"


def test_many_row_keys_at_once_by_hand() -> None:
    assert keys.salted_row_keys([10000001, "10000002"], DAY, 16) == [
        (11, b"11|20261122|10000001"),
        (1, b"01|20261122|10000002"),
    ]
    assert keys.salted_row_keys([10000005], DAY, 1000) == [(978, b"978|20261122|10000005")]
    with pytest.raises(ConfigError, match=r"row key"):
        keys.salted_row_keys([1, "a|b"], DAY, 16)


def test_bucket_prefixes_and_widths() -> None:
    assert keys.bucket_prefix(3, DAY, 16) == b"03|20261122|"
    assert keys.bucket_prefix(0, dt.date(2026, 1, 5), 10) == b"0|20260105|"
    assert keys.bucket_prefix(10, DAY, 11) == b"10|20261122|"
    assert [keys.salt_width(n) for n in (1, 2, 10, 11, 16, 100, 101, 1000)] == [1, 1, 1, 2, 2, 2, 3, 3]
    with pytest.raises(ConfigError, match=r"salt bucket 16 is not in 0..15"):
        keys.bucket_prefix(16, DAY, 16)


def test_split_keys_are_the_bucket_prefixes_after_the_first() -> None:
    assert keys.split_keys(1) == []
    assert keys.split_keys(4) == [b"1", b"2", b"3"]
    sixteen = b"01 02 03 04 05 06 07 08 09 10 11 12 13 14 15".split()
    assert keys.split_keys(16) == sixteen


@pytest.mark.parametrize("bad", [0, -1, 1001, True, 2.0])
def test_bucket_counts_are_checked(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"salt buckets .* must be an integer between 1 and 1000"):
        keys.salt_width(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "a|b", True])
def test_keys_that_cannot_be_in_a_row_key_are_refused(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"row key"):
        keys.row_key(bad, DAY, 16)  # type: ignore[arg-type]


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.integers(min_value=1, max_value=1000))
def test_every_key_lands_in_its_bucket_range(key: int, buckets: int) -> None:
    row = keys.row_key(key, DAY, buckets)
    salt = keys.salt_of(key, buckets)
    assert 0 <= salt < buckets
    assert row.startswith(keys.bucket_prefix(salt, DAY, buckets))
    assert keys.key_of(row) == str(key)
    # the bucket's region: at or after its split key, before the next one
    splits = keys.split_keys(buckets)
    assert salt == 0 or row >= splits[salt - 1]
    assert salt == buckets - 1 or row < splits[salt]
