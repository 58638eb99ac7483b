-- Claims generator ID $2 of namespace $1 for holder $3 with a lease of $4 ms: one atomic
-- statement. The row is created (epoch 1) the first time; otherwise it is taken only when its
-- lease is over by this database's clock (released, or expires_at <= now()), with the next
-- epoch. Concurrent claimants queue on the row lock and each sees the row the previous one
-- committed, so exactly one gets it. No row when the generator ID is held.
INSERT INTO idmint_claims AS c (namespace, generator_id, holder, epoch, expires_at)
VALUES ($1, $2, $3, 1, now() + $4 * interval '1 millisecond')
ON CONFLICT (namespace, generator_id) DO UPDATE
    SET holder = EXCLUDED.holder, epoch = c.epoch + 1, expires_at = EXCLUDED.expires_at,
        updated_at = now()
    WHERE c.expires_at IS NULL OR c.expires_at <= now()
RETURNING c.epoch, c.mark_ms, c.layout
