-- Events per topic and publish hour as the stream read them, with the quarantined and late shares
-- (from stream_counts: one row per batch, topic and hour; FINAL collapses replayed batches).
CREATE OR REPLACE VIEW hourly_topic_volume AS
SELECT
    publish_hour AS hour,
    topic,
    sum(rows_in) AS events,
    sum(rows_out) AS valid,
    sum(bad) AS quarantined,
    sum(late) AS late,
    round(quarantined / greatest(events, 1), 4) AS quarantine_share,
    round(late / greatest(events, 1), 4) AS late_share
FROM stream_counts FINAL
GROUP BY hour, topic
