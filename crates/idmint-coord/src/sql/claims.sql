-- idmint generator-ID claims and high-water marks (PostgresCoordinator; PostgresStore::connect
-- runs this after schema.sql, inside the same transaction and advisory lock).
--
-- One row per (namespace, generator ID). The row is the claim *and* the mark:
--   holder      who holds (or last held) the generator ID, shown to a claimant that conflicts;
--   epoch       the fencing token: +1 on every claim (and on every new history), never down;
--   expires_at  the lease, timed by this database's clock only: set to now() + ttl by the claim
--               and each renewal; NULL once released. A claim is live while expires_at > now();
--               a row whose lease expired (by now()) may be taken over, with a new epoch;
--   mark_ms     the high-water mark (Unix ms): every ID the holder issues lies at or below it;
--               written only by the holder of the row's current epoch, while its lease is live,
--               never lowered; it outlives every claim (release keeps it);
--   layout      the layout fingerprint the mark was written under.
-- Triggers refuse a lower mark or epoch, a key change, any DELETE and any TRUNCATE.
CREATE TABLE IF NOT EXISTS idmint_claims (
    namespace text NOT NULL,
    generator_id bigint NOT NULL CHECK (generator_id >= 0),
    holder text NOT NULL,
    epoch bigint NOT NULL CHECK (epoch >= 1),
    expires_at timestamptz,
    mark_ms bigint CHECK (mark_ms >= 0),
    layout text,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, generator_id)
);

CREATE OR REPLACE TRIGGER idmint_claims_never_decrease
    BEFORE UPDATE ON idmint_claims FOR EACH ROW
    WHEN (NEW.mark_ms < OLD.mark_ms OR (OLD.mark_ms IS NOT NULL AND NEW.mark_ms IS NULL)
          OR NEW.epoch < OLD.epoch
          OR NEW.namespace <> OLD.namespace OR NEW.generator_id <> OLD.generator_id)
    EXECUTE FUNCTION idmint_refuse();
CREATE OR REPLACE TRIGGER idmint_claims_never_delete
    BEFORE DELETE ON idmint_claims FOR EACH ROW EXECUTE FUNCTION idmint_refuse();
CREATE OR REPLACE TRIGGER idmint_claims_never_truncate
    BEFORE TRUNCATE ON idmint_claims FOR EACH STATEMENT EXECUTE FUNCTION idmint_refuse();
