-- user_daily offline columns from ${db}.payments, for one day.
-- :day is bound by Spark as a parameter ('YYYY-MM-DD'); ${db} is replaced by the Hive database.
SELECT
    uid,
    CAST(count(*) AS BIGINT)                                                    AS pay_orders,
    CAST(count_if(status = 'success') AS BIGINT)                                AS pay_success_orders,
    CAST(coalesce(sum(CASE WHEN status = 'success' THEN amount_usd END), 0) AS DOUBLE)  AS pay_amount_usd,
    CAST(coalesce(sum(CASE WHEN status = 'refunded' THEN amount_usd END), 0) AS DOUBLE) AS pay_refund_usd,
    CAST(max(CASE WHEN status = 'success' THEN amount_usd END) AS DOUBLE)       AS pay_max_order_usd,
    CAST(count(DISTINCT channel) AS BIGINT)                                     AS pay_channels,
    min(CASE WHEN status = 'success' THEN pay_time END)                         AS first_pay_at
FROM ${db}.payments
WHERE dt = :day
GROUP BY uid
