-- user_daily offline columns from the ${db}.social_graph snapshot of one day.
-- :day is bound by Spark as a parameter ('YYYY-MM-DD'); ${db} is replaced by the Hive database.
WITH edges AS (
    SELECT uid, peer_uid, relation, created_time
    FROM ${db}.social_graph
    WHERE dt = :day
),
follows AS (
    SELECT uid, peer_uid, created_time FROM edges WHERE relation = 'follow'
),
out_degree AS (
    SELECT uid, count(*) AS followings FROM follows GROUP BY uid
),
in_degree AS (
    SELECT peer_uid AS uid,
           count(*) AS followers,
           count_if(to_date(created_time) = to_date(:day)) AS new_followers
    FROM follows
    GROUP BY peer_uid
),
mutual AS (
    SELECT a.uid, count(*) AS mutual_friends
    FROM follows a
    JOIN follows b ON a.uid = b.peer_uid AND a.peer_uid = b.uid
    GROUP BY a.uid
),
blocks AS (
    SELECT uid, count(*) AS blocked_users FROM edges WHERE relation = 'block' GROUP BY uid
),
users AS (
    SELECT uid FROM out_degree
    UNION
    SELECT uid FROM in_degree
    UNION
    SELECT uid FROM blocks
)
SELECT
    users.uid,
    CAST(coalesce(out_degree.followings, 0) AS BIGINT)  AS followings,
    CAST(coalesce(in_degree.followers, 0) AS BIGINT)    AS followers,
    CAST(coalesce(mutual.mutual_friends, 0) AS BIGINT)  AS mutual_friends,
    CAST(coalesce(in_degree.new_followers, 0) AS BIGINT) AS new_followers,
    CAST(coalesce(blocks.blocked_users, 0) AS BIGINT)   AS blocked_users
FROM users
LEFT JOIN out_degree ON out_degree.uid = users.uid
LEFT JOIN in_degree ON in_degree.uid = users.uid
LEFT JOIN mutual ON mutual.uid = users.uid
LEFT JOIN blocks ON blocks.uid = users.uid
