-- The fenced mark write of claim ($1, $2) at epoch $3: mark $4 under layout $5, only while the
-- epoch is unchanged (no takeover), the lease live, and the mark not lowered. No row: the
-- caller reads the row to tell a lost claim from a lower mark.
UPDATE idmint_claims SET mark_ms = $4, layout = $5, updated_at = now()
WHERE namespace = $1 AND generator_id = $2 AND epoch = $3 AND expires_at > now()
    AND (mark_ms IS NULL OR mark_ms <= $4)
RETURNING mark_ms
