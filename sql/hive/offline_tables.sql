-- The offline Hive tables the daily table's offline columns are computed from.
-- Created (and filled with demo data) by `widehouse generate-offline`; ${db} is the Hive database.
-- Each table is partitioned by dt ('YYYY-MM-DD'): payments per day, profile and social graph as
-- daily snapshots.

CREATE TABLE IF NOT EXISTS ${db}.payments (
    order_id   STRING    COMMENT 'payment order id',
    uid        BIGINT    COMMENT 'BIGO account id',
    pay_time   TIMESTAMP COMMENT 'when the order was created (UTC)',
    amount_usd DOUBLE    COMMENT 'order amount in USD',
    currency   STRING    COMMENT 'currency the user paid in',
    channel    STRING    COMMENT 'google_play, app_store, card, wallet, carrier',
    product    STRING    COMMENT 'what was bought',
    status     STRING    COMMENT 'success, failed or refunded'
)
PARTITIONED BY (dt STRING)
STORED AS PARQUET;

CREATE TABLE IF NOT EXISTS ${db}.user_profile (
    uid           BIGINT    COMMENT 'BIGO account id',
    nickname      STRING    COMMENT 'display name',
    country       STRING    COMMENT 'registration country (ISO 3166 alpha-2)',
    language      STRING    COMMENT 'app language',
    gender        STRING    COMMENT 'male, female or unknown',
    birth_year    INT       COMMENT 'declared year of birth',
    register_time TIMESTAMP COMMENT 'when the account was created (UTC)',
    user_level    INT       COMMENT 'user level',
    vip_level     INT       COMMENT 'VIP level, 0 for none',
    is_anchor     BOOLEAN   COMMENT 'signed anchor'
)
PARTITIONED BY (dt STRING)
STORED AS PARQUET;

CREATE TABLE IF NOT EXISTS ${db}.social_graph (
    uid          BIGINT    COMMENT 'the user',
    peer_uid     BIGINT    COMMENT 'the other user',
    relation     STRING    COMMENT 'follow (uid follows peer_uid) or block',
    created_time TIMESTAMP COMMENT 'when the edge was created (UTC)'
)
PARTITIONED BY (dt STRING)
STORED AS PARQUET;
