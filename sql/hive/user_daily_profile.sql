-- user_daily offline columns from the ${db}.user_profile snapshot of one day.
-- :day is bound by Spark as a parameter ('YYYY-MM-DD'); ${db} is replaced by the Hive database.
SELECT
    uid,
    country,
    language,
    gender,
    CAST(year(to_date(:day)) - birth_year AS INT)                 AS age,
    CAST(user_level AS INT)                                       AS user_level,
    CAST(vip_level AS INT)                                        AS vip_level,
    is_anchor,
    CAST(datediff(to_date(:day), to_date(register_time)) AS INT)  AS register_days
FROM ${db}.user_profile
WHERE dt = :day
