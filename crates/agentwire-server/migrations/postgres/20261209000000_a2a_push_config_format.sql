-- The form of a push-notification config's notifications: the protocol
-- version of the client that registered it ('1.0': StreamResponse events;
-- '0.3': the whole task in its 0.3 JSON form). Configs stored before this
-- migration were all registered through 1.0.
ALTER TABLE a2a_push_configs ADD COLUMN IF NOT EXISTS format TEXT NOT NULL DEFAULT '1.0';
