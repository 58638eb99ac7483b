-- Raises counter $1 to $2 when it is below: one atomic statement, as next_counter.sql. No row
-- when the counter is already at $2 or above (nothing is written); the read of its value then
-- is only for the error message.
INSERT INTO idmint_counters AS c (name, value) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE
    SET value = $2, updated_at = now()
    WHERE c.value < $2
RETURNING c.value
