-- Releases claim ($1, $2) at epoch $3: the lease ends, the holder's name and the mark stay.
UPDATE idmint_claims SET expires_at = NULL, updated_at = now()
WHERE namespace = $1 AND generator_id = $2 AND epoch = $3 AND expires_at IS NOT NULL
