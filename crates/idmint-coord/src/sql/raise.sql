-- The post-promotion bump: every segment row up by $1 and every counter up by $2, capped at
-- bigint's maximum (then exhausted, never wrapped). Run in the history check's transaction.
WITH segments AS (
    UPDATE idmint_segments
        SET max_id = LEAST(max_id, 9223372036854775807 - $1) + $1, updated_at = now()
        RETURNING 1
), counters AS (
    UPDATE idmint_counters
        SET value = LEAST(value, 9223372036854775807 - $2) + $2, updated_at = now()
        RETURNING 1
)
SELECT (SELECT count(*) FROM segments), (SELECT count(*) FROM counters)
