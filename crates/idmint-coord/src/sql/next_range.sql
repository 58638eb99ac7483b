-- The next range of namespace $1: $2 IDs, none of them above $3 (2^63 - 1). One atomic
-- statement: the row is created at max_id = $2 the first time, else bumped by $2 under its row
-- lock (a concurrent caller waits, then bumps the value this one committed). It returns the
-- last ID before the range and the range's last ID, i.e. the IDs (previous, max_id]; no row
-- when the range would pass $3 (nothing is written).
INSERT INTO idmint_segments AS s (namespace, max_id) VALUES ($1, $2)
ON CONFLICT (namespace) DO UPDATE
    SET max_id = s.max_id + $2, updated_at = now()
    WHERE s.max_id <= $3 - $2
RETURNING s.max_id - $2 AS previous, s.max_id
