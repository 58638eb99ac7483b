-- The next value of counter $1, at most $2: one atomic statement, as next_range.sql. No row
-- when the counter is already at $2 (nothing is written; it never wraps).
INSERT INTO idmint_counters AS c (name, value) VALUES ($1, 1)
ON CONFLICT (name) DO UPDATE
    SET value = c.value + 1, updated_at = now()
    WHERE c.value < $2
RETURNING c.value
