-- The push-notification signing key shared by the replicas of a server
-- (PostgresOutbox::shared_signer): one Ed25519 key, PKCS#8 DER, created by
-- the first replica that needs it. Receivers fetch the JWKS from whichever
-- replica answers, so every replica must sign with it.
CREATE TABLE IF NOT EXISTS a2a_push_key (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    pkcs8  BYTEA NOT NULL
);
