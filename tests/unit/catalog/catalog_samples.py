"""Sample catalog files for the catalog tests (a small, valid catalog)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

HOURLY = """\
wide_table: shop_hourly
description: one row per user per hour
grain: hour
key: {name: uid, type: long}
columns:
  - orders
  - {name: spent, description: money spent}
  - last_city
  - big_orders
"""

DAILY = """\
wide_table: shop_daily
grain: day
key: {name: uid, type: long}
columns: [orders, spent]
offline:
  - name: payments
    hive_tables: [payments]
    sql: hive/shop_daily_payments.sql
    columns:
      pay_orders: long
      pay_usd: {type: double, description: paid}
"""

PAY = """\
topic: persistent://acme/shop/pay
description: a payment
key: uid
event_time: ts
traffic: {weight: 2, partitions: 3}
fields:
  uid: long
  ts: timestamp-ms
  amount: {type: double, range: [1, 100]}
  city: {type: string, values: [yes, no, Paris]}
  item:
    type: object
    fields:
      sku: string
      price: {type: long, values: [10, 2000]}
  tags: array<string>
  attrs: "map<string,long>"
columns:
  shop_hourly:
    orders: count
    spent: sum(amount)
    last_city: last(city)
    big_orders: {agg: count, filter: "item.price >= 1000 and city != 'Paris'"}
  shop_daily:
    orders: count
    spent: sum(amount)
"""

SQL = """\
SELECT uid, CAST(count(*) AS BIGINT) AS pay_orders, CAST(sum(amount) AS DOUBLE) AS pay_usd
FROM ${db}.payments WHERE dt = :day GROUP BY uid
"""

FILES = {
    "schemas/tables/shop_hourly.yaml": HOURLY,
    "schemas/tables/shop_daily.yaml": DAILY,
    "schemas/topics/acme/shop/pay.yaml": PAY,
    "sql/hive/shop_daily_payments.sql": SQL,
}

Writer = Callable[..., Path]
