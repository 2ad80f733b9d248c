-- Daily actives and payers per country (user_daily: finalized days, plus the live day).
-- active: any sign-in, app open, screen, live room or video that day; payer: a successful order
-- (Hive payments) or an in-app recharge (stream). country comes from the Hive profile snapshot,
-- so live (not yet merged) days show 'unknown' until the daily merge has run.
CREATE OR REPLACE VIEW daily_actives_by_country AS
SELECT
    day,
    ifNull(country, 'unknown') AS country,
    countIf(logins > 0 OR app_opens > 0 OR page_views > 0 OR live_enters > 0 OR videos_played > 0) AS actives,
    countIf(ifNull(pay_success_orders, 0) > 0 OR recharges > 0) AS payers,
    round(sum(ifNull(pay_amount_usd, 0)), 2) AS pay_usd,
    round(payers / greatest(actives, 1), 4) AS payer_share
FROM user_daily
GROUP BY day, country
