-- The post-promotion bump: every segment row up by $1, every counter up by $2 and every
-- generator-ID mark up by $3 ms, capped at bigint's maximum (then exhausted, never wrapped); a
-- claim row without a mark (its first mark may have been lost) gets this database's now + $3.
-- Every claim ends (lease released, epoch +1), so a holder from before the new history claims
-- again and reads its raised mark. Run in the history check's transaction.
WITH segments AS (
    UPDATE idmint_segments
        SET max_id = LEAST(max_id, 9223372036854775807 - $1) + $1, updated_at = now()
        RETURNING 1
), counters AS (
    UPDATE idmint_counters
        SET value = LEAST(value, 9223372036854775807 - $2) + $2, updated_at = now()
        RETURNING 1
), marks AS (
    UPDATE idmint_claims
        SET mark_ms = LEAST(COALESCE(mark_ms, (extract(epoch FROM now()) * 1000)::bigint),
                            9223372036854775807 - $3) + $3,
            epoch = epoch + 1, expires_at = NULL, updated_at = now()
        RETURNING 1
)
SELECT (SELECT count(*) FROM segments), (SELECT count(*) FROM counters),
       (SELECT count(*) FROM marks)
