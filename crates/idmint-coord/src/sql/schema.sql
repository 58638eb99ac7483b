-- idmint segments and counters (PostgresStore::connect runs this, inside one transaction).
--
-- Each row holds a high-water mark that only ever grows: `max_id` is the last segment ID handed
-- out for a namespace, `value` the last value of a counter. A row that went down, or vanished,
-- would hand the same IDs out again, so triggers refuse every decrease, every key change,
-- every DELETE and every TRUNCATE (PD's "never save a smaller window" rule). Raising a row by
-- hand is allowed, and is the documented repair after restoring a backup or promoting an
-- asynchronous replica: `UPDATE idmint_segments SET max_id = max_id + <many steps>`.

-- Serialises concurrent first connections: CREATE ... IF NOT EXISTS is not safe against a
-- concurrent CREATE of the same table.
SELECT pg_advisory_xact_lock(7587007236661834087);

CREATE TABLE IF NOT EXISTS idmint_segments (
    namespace text PRIMARY KEY,
    max_id bigint NOT NULL CHECK (max_id >= 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS idmint_counters (
    name text PRIMARY KEY,
    value bigint NOT NULL CHECK (value >= 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE OR REPLACE FUNCTION idmint_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'idmint: % on % refused: its values never go down, or ids would be handed out twice', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'check_violation';
END
$$;

CREATE OR REPLACE TRIGGER idmint_segments_never_decrease
    BEFORE UPDATE ON idmint_segments FOR EACH ROW
    WHEN (NEW.max_id < OLD.max_id OR NEW.namespace <> OLD.namespace)
    EXECUTE FUNCTION idmint_refuse();
CREATE OR REPLACE TRIGGER idmint_segments_never_delete
    BEFORE DELETE ON idmint_segments FOR EACH ROW EXECUTE FUNCTION idmint_refuse();
CREATE OR REPLACE TRIGGER idmint_segments_never_truncate
    BEFORE TRUNCATE ON idmint_segments FOR EACH STATEMENT EXECUTE FUNCTION idmint_refuse();

CREATE OR REPLACE TRIGGER idmint_counters_never_decrease
    BEFORE UPDATE ON idmint_counters FOR EACH ROW
    WHEN (NEW.value < OLD.value OR NEW.name <> OLD.name)
    EXECUTE FUNCTION idmint_refuse();
CREATE OR REPLACE TRIGGER idmint_counters_never_delete
    BEFORE DELETE ON idmint_counters FOR EACH ROW EXECUTE FUNCTION idmint_refuse();
CREATE OR REPLACE TRIGGER idmint_counters_never_truncate
    BEFORE TRUNCATE ON idmint_counters FOR EACH STATEMENT EXECUTE FUNCTION idmint_refuse();

-- What the store knows of the cluster's history: the row `history` holds the identity
-- (`system_identifier=<n> timeline=<n>`) of the cluster that last handed out ranges. A promoted
-- standby or a point-in-time restore runs on a new timeline (a logical restore on a new
-- system), so on connecting the store finds the recorded identity differs from the live one
-- and raises every row by its promotion margins before handing out anything (raise.sql, run
-- by PostgresStore's history check in one transaction under an advisory lock).
CREATE TABLE IF NOT EXISTS idmint_meta (
    key text PRIMARY KEY,
    value text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The store's own name: a random UUID written once, when the schema is first created in a
-- database. It travels with the data (a promoted standby, a physical or logical restore keep
-- the row), and a dropped schema or a new database gets a new one, so a server that remembers
-- the store it claimed on (its data directory's `fleet.d`) can tell a wiped database on the
-- same Postgres cluster from the one it used.
INSERT INTO idmint_meta (key, value) VALUES ('store', gen_random_uuid()::text)
    ON CONFLICT (key) DO NOTHING;
