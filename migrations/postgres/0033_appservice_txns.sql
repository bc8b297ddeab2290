-- The numbers of the transactions the homeserver sent (Synapse numbers them one by one):
-- one that skips past the last is asked to be sent again (`appservice/gaps.rs`), across
-- restarts and instances. The last 1,000 are kept.
CREATE TABLE appservice_txns (
    number  BIGINT PRIMARY KEY,
    seen_at BIGINT NOT NULL
);
