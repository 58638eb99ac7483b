-- Whether this server is a standby, its system identifier (new at initdb, kept by
-- pg_basebackup) and the name of its current WAL file, whose first 8 hex digits are the
-- current timeline (new after a promotion or a point-in-time restore). An ordinary owner role
-- may call these; pg_current_wal_lsn fails on a standby, so recovery is read first.
SELECT pg_is_in_recovery(),
       (SELECT system_identifier::text FROM pg_control_system()),
       CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_walfile_name(pg_current_wal_lsn()) END
