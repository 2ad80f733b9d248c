-- The day's top 100 gifters by diamonds spent on gifts, with their country and VIP level.
CREATE OR REPLACE VIEW top_gifters_daily AS
SELECT day, rank, uid, gift_diamonds_sent, gifts_sent, big_gifts_sent, country, vip_level
FROM
(
    SELECT
        day,
        uid,
        gift_diamonds_sent,
        gifts_sent,
        big_gifts_sent,
        country,
        vip_level,
        row_number() OVER (PARTITION BY day ORDER BY gift_diamonds_sent DESC, uid ASC) AS rank
    FROM user_daily
    WHERE ifNull(gift_diamonds_sent, 0) > 0
)
WHERE rank <= 100
