-- Renews the lease of claim ($1, $2) at epoch $3 to now() + $4 ms. Only a live lease is renewed
-- (a lapsed one is never revived, even if nobody took it over): no row means the claim is lost.
UPDATE idmint_claims SET expires_at = now() + $4 * interval '1 millisecond'
WHERE namespace = $1 AND generator_id = $2 AND epoch = $3 AND expires_at > now()
RETURNING epoch
