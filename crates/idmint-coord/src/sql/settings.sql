-- The settings that decide whether a committed range survives a crash of the server, as this
-- session sees them (synchronous_commit can be set per role and database).
SELECT current_setting('fsync'), current_setting('synchronous_commit')
