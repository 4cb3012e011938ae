"""Numbered, forward-only migrations of the PostgreSQL backend; applied ones are never edited.

The tables are SQLite's (`sqlite/_schema.py`) in PostgreSQL's types: times are `timestamptz`
and JSON is `jsonb`. Values cross the storage seam as integer microseconds and JSON text, so
`sg_ts` and `sg_us` convert exactly at the statement (both inlined by the planner since
migration 8), and full-text search is a generated `tsvector` column with a GIN index instead
of FTS5's side table: it is written in the same transaction as its row, so it can never go
stale.

The module is over the ~400-line budget because it is one ordered history: a migration, once
applied, is never edited, so the list only grows, and splitting it would split the order.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

_V1 = [
    # Exact conversions between the seam's microseconds and timestamptz (microsecond precision).
    """CREATE FUNCTION sg_ts(us bigint) RETURNS timestamptz
        LANGUAGE sql IMMUTABLE PARALLEL SAFE
        RETURN timestamptz '1970-01-01 00:00:00+00' + us * interval '1 microsecond'""",
    """CREATE FUNCTION sg_us(t timestamptz) RETURNS bigint
        LANGUAGE sql IMMUTABLE PARALLEL SAFE
        RETURN (extract(epoch FROM t) * 1000000)::bigint""",
    "CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL)",
    """CREATE TABLE routes (
        session_key text PRIMARY KEY,
        session_id text NOT NULL,
        platform text,
        chat_type text NOT NULL,
        chat_id text,
        thread_id text,
        participant_id text,
        updated_at timestamptz NOT NULL,
        pinned_at timestamptz,
        archived_at timestamptz,
        suspended boolean NOT NULL DEFAULT false,
        resume_pending boolean NOT NULL DEFAULT false,
        label text,
        data jsonb NOT NULL
    )""",
    "CREATE INDEX routes_session_id ON routes(session_id)",
    "CREATE UNIQUE INDEX routes_label ON routes(label) WHERE label IS NOT NULL",
    """CREATE TABLE sessions (
        sid bigserial PRIMARY KEY,
        session_id text NOT NULL UNIQUE,
        session_key text,
        parent_session_id text,
        started_at timestamptz NOT NULL,
        ended_at timestamptz,
        end_reason text,
        generation integer NOT NULL DEFAULT 0,
        header jsonb NOT NULL,
        counters jsonb
    )""",
    "CREATE INDEX sessions_key ON sessions(session_key, started_at)",
    # `search` indexes user and assistant message text only (what FTS5 indexes on SQLite).
    """CREATE TABLE entries (
        id bigserial PRIMARY KEY,
        sid bigint NOT NULL,
        parent_id bigint,
        depth integer NOT NULL,
        mdepth integer NOT NULL,
        on_path smallint NOT NULL DEFAULT 1,
        type text NOT NULL,
        role text,
        content text,
        payload jsonb,
        ts timestamptz NOT NULL,
        idem text,
        search tsvector GENERATED ALWAYS AS (
            CASE WHEN type = 'message' AND role IN ('user', 'assistant')
                THEN to_tsvector('simple', coalesce(content, '')) END
        ) STORED
    )""",
    "CREATE INDEX entries_path ON entries(sid, on_path, depth)",
    "CREATE UNIQUE INDEX entries_idem ON entries(sid, idem) WHERE idem IS NOT NULL",
    "CREATE INDEX entries_search ON entries USING gin(search)",
    """CREATE TABLE tips (
        sid bigint NOT NULL REFERENCES sessions(sid) ON DELETE CASCADE,
        entry_id bigint NOT NULL,
        PRIMARY KEY (sid, entry_id)
    )""",
    """CREATE TABLE identity_aliases (
        platform text NOT NULL,
        alias text NOT NULL,
        canonical text NOT NULL,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (platform, alias)
    )""",
    """CREATE TABLE tombstones (
        session_key text PRIMARY KEY,
        deleted_at timestamptz NOT NULL,
        reason text NOT NULL
    )""",
    # The gateway's durable work, as on SQLite (see the comment on its migration 3).
    """CREATE TABLE inbox (
        id bigserial PRIMARY KEY,
        session_key text NOT NULL,
        kind text NOT NULL CHECK (kind IN ('slot', 'queued')),
        state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'claimed')),
        turn_id bigint,
        text text NOT NULL,
        parts jsonb NOT NULL,
        media jsonb NOT NULL DEFAULT '[]',
        message_id text,
        message_ids jsonb NOT NULL DEFAULT '[]',
        source jsonb NOT NULL,
        message_type text NOT NULL,
        reply_to text,
        event_kind text,
        internal boolean NOT NULL DEFAULT false,
        accepted_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL
    )""",
    "CREATE INDEX inbox_lane ON inbox(session_key, state, id)",
    "CREATE UNIQUE INDEX inbox_one_slot ON inbox(session_key) "
    "WHERE kind = 'slot' AND state = 'pending'",
    """CREATE TABLE inbound_seen (
        platform text NOT NULL,
        chat_id text NOT NULL,
        message_id text NOT NULL,
        session_key text NOT NULL,
        sender_id text NOT NULL,
        content_hash text,
        session_id text,
        inbox_id bigint,
        turn_id bigint,
        status text NOT NULL,
        reply text,
        seen_at timestamptz NOT NULL,
        PRIMARY KEY (platform, chat_id, message_id, session_key, sender_id)
    )""",
    "CREATE INDEX inbound_seen_inbox ON inbound_seen(inbox_id) WHERE inbox_id IS NOT NULL",
    "CREATE INDEX inbound_seen_at ON inbound_seen(seen_at)",
    """CREATE TABLE turns (
        id bigserial PRIMARY KEY,
        session_key text NOT NULL,
        session_id text NOT NULL,
        inbox_id bigint,
        state text NOT NULL CHECK (state IN
            ('accepted', 'running', 'replied', 'delivered', 'failed', 'interrupted')),
        attempt integer NOT NULL DEFAULT 1,
        resumes integer NOT NULL DEFAULT 0,
        source jsonb NOT NULL,
        reply text,
        error text,
        accepted_at timestamptz NOT NULL,
        started_at timestamptz,
        finished_at timestamptz,
        delivered_at timestamptz
    )""",
    "CREATE INDEX turns_state ON turns(state)",
    "CREATE INDEX turns_key ON turns(session_key, id)",
    """CREATE TABLE restart_counts (
        session_key text PRIMARY KEY,
        count integer NOT NULL,
        updated_at timestamptz NOT NULL
    )""",
]

# Many instances on one database (DESIGN decision 12: ownership is fenced, not timed). Every
# time is the database's clock (`now()`), never an instance's. `lane_lease` is the fence: the
# epoch rises on every takeover, and an outcome commits only in a transaction that first
# renewed the lease at its own epoch (that row lock makes a takeover wait for the commit, then
# fail its expiry test). fillfactor 80 and no index on `expires_at` keep renewals HOT updates.
# `leader_lease` is the same for singular roles (one Telegram poller, one Discord socket).
_V2 = [
    """CREATE TABLE instances (
        instance_id text PRIMARY KEY,
        host text NOT NULL,
        pid integer NOT NULL,
        started_at timestamptz NOT NULL DEFAULT now(),
        heartbeat_at timestamptz NOT NULL DEFAULT now(),
        state text NOT NULL DEFAULT 'live' CHECK (state IN ('live', 'stopped', 'dead'))
    )""",
    """CREATE TABLE lane_lease (
        session_key text PRIMARY KEY,
        owner text,
        epoch bigint NOT NULL,
        expires_at timestamptz
    ) WITH (fillfactor = 80)""",
    "CREATE INDEX lane_lease_owner ON lane_lease(owner) WHERE owner IS NOT NULL",
    """CREATE TABLE leader_lease (
        name text PRIMARY KEY,
        owner text,
        epoch bigint NOT NULL,
        expires_at timestamptz
    ) WITH (fillfactor = 80)""",
]

# What platform adapters keep, as on SQLite (see the comment on its migration 7).
_V3 = [
    """CREATE TABLE platform_events (
        platform text NOT NULL,
        event_id text NOT NULL,
        state text NOT NULL CHECK (state IN ('claimed', 'done')),
        owner text NOT NULL,
        claimed_at timestamptz NOT NULL,
        PRIMARY KEY (platform, event_id)
    )""",
    "CREATE INDEX platform_events_at ON platform_events(claimed_at)",
    """CREATE TABLE pairing (
        platform text NOT NULL,
        user_id text NOT NULL,
        code text NOT NULL,
        chat_id text NOT NULL,
        user_name text,
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL,
        approved_at timestamptz,
        PRIMARY KEY (platform, user_id)
    )""",
    "CREATE UNIQUE INDEX pairing_code ON pairing(code)",
    """CREATE TABLE platform_threads (
        platform text NOT NULL,
        chat_id text NOT NULL,
        thread_id text NOT NULL,
        joined_at timestamptz NOT NULL,
        PRIMARY KEY (platform, chat_id, thread_id)
    )""",
    """CREATE TABLE platform_sends (
        platform text NOT NULL,
        turn_id bigint NOT NULL,
        state text NOT NULL CHECK (state IN ('sending', 'sent', 'unconfirmed', 'refused')),
        detail text,
        at timestamptz NOT NULL,
        PRIMARY KEY (platform, turn_id)
    )""",
]

# The per-lane writer lock: every accept upserts its lane's row first, so the accepts of one lane
# commit one after another in the order they took it (and each inbox id is drawn under it,
# after the previous accept's commit); an idle lane's release takes the same lock, so a message
# accepted meanwhile is never left without an owner.
# `probe_ready`: the instance holds a session advisory lock on its id on a connection of its
# own, so once that lock is free its process is gone (a SIGKILL closes the socket at once) and
# its lanes can move on without waiting out the lease (`leases.reap_vanished`).
_V4 = [
    """CREATE TABLE lane_seq (
        session_key text PRIMARY KEY,
        next_seq bigint NOT NULL
    ) WITH (fillfactor = 80)""",
    "ALTER TABLE instances ADD COLUMN probe_ready boolean NOT NULL DEFAULT false",
]

# `backend_pid`: the writer connection's server process as of the last heartbeat. An instance
# declared dead may be paused inside a transaction whose row locks (its lease renewal's among
# them) would hold its lanes until it wakes: declaring it dead also ends that session.
_V5 = ["ALTER TABLE instances ADD COLUMN backend_pid integer"]

# Statements that fail their transaction instead of answering how many rows they touched, so
# they are sent with the transaction's next statements and never waited for on their own: the
# fence (a renewal refused raises `SGL01`, `_errors.LEASE_LOST`; `PostgresTx.fence_lane`) and
# a reply's journal step (`SGT01`, `_errors.TURN_REFUSED`).
_V6 = [
    """CREATE FUNCTION sg_fence_lane(p_key text, p_owner text, p_epoch bigint, p_ttl float8)
        RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE lane_lease SET expires_at = now() + make_interval(secs => p_ttl)
        WHERE session_key = p_key AND owner = p_owner AND epoch = p_epoch
          AND expires_at > now();
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'SGL01',
                MESSAGE = format('lane %L is no longer owned by %s at epoch %s',
                                 p_key, p_owner, p_epoch);
        END IF;
    END $$""",
    # Running -> replied (or delivered), or `SGT01` with the turn's state (no row: none).
    """CREATE FUNCTION sg_finish_reply(p_id bigint, p_to text, p_reply text, p_at bigint)
        RETURNS void LANGUAGE plpgsql AS $$
    DECLARE
        found_state text;
    BEGIN
        UPDATE turns SET state = p_to, reply = p_reply, finished_at = sg_ts(p_at),
            delivered_at = CASE WHEN p_to = 'delivered' THEN sg_ts(p_at) END
        WHERE id = p_id AND state = 'running';
        IF NOT FOUND THEN
            SELECT state INTO found_state FROM turns WHERE id = p_id;
            RAISE EXCEPTION USING ERRCODE = 'SGT01', MESSAGE = coalesce(found_state, ''),
                DETAIL = p_id::text;
        END IF;
    END $$""",
]

_V7 = [
    # A route written over as the writer last saw it, without reading it first: the
    # outcome of a turn whose claim wrote the route. `SGR01` when it is no longer so (another
    # instance's write, a reset, a deletion): the transaction fails, and is run again with
    # the route read.
    """CREATE FUNCTION sg_put_route_seen(p_seen jsonb, p_key text, p_sid text, p_updated bigint,
            p_pinned bigint, p_archived bigint, p_suspended boolean, p_resume boolean,
            p_label text, p_data jsonb)
        RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE routes SET updated_at = sg_ts(p_updated), pinned_at = sg_ts(p_pinned),
            archived_at = sg_ts(p_archived), suspended = p_suspended,
            resume_pending = p_resume, label = p_label, data = p_data
        WHERE session_key = p_key AND session_id = p_sid AND data = p_seen;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'SGR01',
                MESSAGE = format('the route of %L changed since it was seen', p_key);
        END IF;
    END $$""",
    # The same check for a route the transaction read so and did not write.
    """CREATE FUNCTION sg_route_seen(p_seen jsonb, p_key text)
        RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM 1 FROM routes WHERE session_key = p_key AND data = p_seen FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'SGR01',
                MESSAGE = format('the route of %L changed since it was seen', p_key);
        END IF;
    END $$""",
]

# The planner inlines a SQL function only when its body is no more volatile than it is
# declared, and `timestamptz + interval` and `extract(epoch FROM timestamptz)` are STABLE: as
# IMMUTABLE, `sg_ts` and `sg_us` were called through the SQL-function executor, their bodies
# parsed again on every statement that used them, a seventh of the server's CPU in a turn.
# Neither is used where IMMUTABLE is required (an index, a generated column, a constraint).
_V8 = [
    "ALTER FUNCTION sg_ts(bigint) STABLE",
    "ALTER FUNCTION sg_us(timestamptz) STABLE",
]

# A receiver's cursor per platform and account, as on SQLite (see its migration 9).
_V9 = [
    """CREATE TABLE platform_cursors (
        platform text NOT NULL,
        account text NOT NULL,
        cursor text NOT NULL,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (platform, account)
    )""",
]

# Erasure receipts, as on SQLite (see the comment on its migration 10).
_V10 = [
    """CREATE TABLE erasures (
        id bigserial PRIMARY KEY,
        erased_at timestamptz NOT NULL,
        subject_hash text NOT NULL,
        counts jsonb NOT NULL
    )""",
    "CREATE INDEX erasures_subject ON erasures(subject_hash)",
]

# Scheduled jobs and their claimed slots, as on SQLite (see the comment on its migration 11).
# The unique (job, slot) key is the fence between instances: one claim commits, the others'
# `ON CONFLICT DO NOTHING` find it.
_V11 = [
    """CREATE TABLE jobs (
        job_id text PRIMARY KEY,
        spec jsonb NOT NULL,
        paused boolean NOT NULL DEFAULT false,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        cursor_at timestamptz
    )""",
    """CREATE TABLE job_runs (
        run_id bigserial PRIMARY KEY,
        job_id text NOT NULL,
        slot_at timestamptz NOT NULL,
        claimed_at timestamptz NOT NULL,
        owner text NOT NULL,
        state text NOT NULL,
        session_key text,
        turn_id bigint,
        skipped integer NOT NULL DEFAULT 0,
        detail text,
        UNIQUE (job_id, slot_at)
    )""",
    "CREATE INDEX job_runs_unfinished ON job_runs(state) WHERE state <> 'accepted'",
    "CREATE INDEX job_runs_turn ON job_runs(turn_id) WHERE turn_id IS NOT NULL",
]

# Tool calls waiting for approval, as on SQLite (see the comment on its migration 12).
_V12 = [
    """CREATE TABLE approvals (
        id text PRIMARY KEY,
        turn_id bigint NOT NULL,
        call_id text NOT NULL,
        session_key text NOT NULL,
        tool text NOT NULL,
        arguments text NOT NULL,
        arguments_sha256 text NOT NULL,
        approvers jsonb NOT NULL,
        status text NOT NULL,
        requested_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL,
        decided_at timestamptz,
        decided_by text,
        used boolean NOT NULL DEFAULT false,
        UNIQUE (turn_id, call_id)
    )""",
    "CREATE INDEX approvals_pending ON approvals(status, session_key)",
]

# Deliveries, as on SQLite (see the comment on its migration 13).
_V13 = [
    """CREATE TABLE deliveries (
        id bigserial PRIMARY KEY,
        kind text NOT NULL,
        turn_id bigint,
        session_key text,
        platform text NOT NULL,
        source text NOT NULL,
        text text NOT NULL,
        status text NOT NULL CHECK (status IN ('pending', 'sent', 'failed', 'dead')),
        attempts integer NOT NULL DEFAULT 0,
        message_id text,
        reason text,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        next_at timestamptz NOT NULL
    )""",
    "CREATE UNIQUE INDEX deliveries_reply ON deliveries(turn_id) WHERE kind = 'reply'",
    "CREATE INDEX deliveries_status ON deliveries(status, next_at)",
]

# The outbox of outbound webhook events, as on SQLite (see its migration 14).
_V14 = [
    """CREATE TABLE webhook_outbox (
        id bigserial PRIMARY KEY,
        event_id text NOT NULL UNIQUE,
        target text NOT NULL,
        event text NOT NULL,
        session_key text,
        body text NOT NULL,
        status text NOT NULL CHECK (status IN ('pending', 'sent', 'dead')),
        attempts integer NOT NULL DEFAULT 0,
        reason text,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        next_at timestamptz NOT NULL
    )""",
    "CREATE INDEX webhook_outbox_status ON webhook_outbox(status, id)",
]

# Lanes an operator took over, as on SQLite (see its migration 15).
_V15 = [
    """CREATE TABLE takeovers (
        session_key text PRIMARY KEY,
        taken_by text NOT NULL,
        since timestamptz NOT NULL,
        resume_at timestamptz
    )""",
]

# Delivery ids inbound webhook routes took, as on SQLite (see its migration 16).
_V16 = [
    """CREATE TABLE hook_receipts (
        route text NOT NULL,
        delivery_id text NOT NULL,
        received_at timestamptz NOT NULL,
        turn_id bigint,
        session_key text,
        PRIMARY KEY (route, delivery_id)
    )""",
    "CREATE INDEX hook_receipts_received ON hook_receipts(received_at)",
]

# A turn's entries in one statement (`PostgresEntries.insert_entries`): the client's loop of
# inserts, each waiting for the previous one's id as its parent, run at the server instead;
# the same statements, so the same results, in one round trip. A record whose key is taken
# is skipped (NULL in the answer) and the next one hangs from the last inserted, as before.
_V17 = [
    """CREATE FUNCTION sg_append_entries(p_sid bigint, p_leaf bigint, p_depth integer,
            p_mdepth integer, p_types text[], p_roles text[], p_contents text[],
            p_payloads text[], p_ts bigint[], p_idems text[])
        RETURNS bigint[] LANGUAGE plpgsql AS $$
    DECLARE
        ids bigint[] := '{}';
        new_id bigint;
        is_message integer;
    BEGIN
        FOR i IN 1 .. coalesce(array_length(p_types, 1), 0) LOOP
            is_message := (p_types[i] = 'message')::integer;
            INSERT INTO entries (sid, parent_id, depth, mdepth, type, role, content, payload,
                ts, idem)
            VALUES (p_sid, p_leaf, p_depth + 1, p_mdepth + is_message, p_types[i], p_roles[i],
                p_contents[i], p_payloads[i]::jsonb, sg_ts(p_ts[i]), p_idems[i])
            ON CONFLICT DO NOTHING RETURNING id INTO new_id;
            IF FOUND THEN
                p_leaf := new_id;
                p_depth := p_depth + 1;
                p_mdepth := p_mdepth + is_message;
                ids := ids || new_id;
            ELSE
                ids := ids || NULL::bigint;
            END IF;
        END LOOP;
        RETURN ids;
    END $$""",
    # A route read for writing (`PostgresRoutes._route`) in one round trip: locked if it
    # exists; if not, read again under the key's lock (to the commit), so a route another
    # writer made meanwhile shows. The last column tells whether the key was locked; a row of
    # NULLs and true: there is no route, and the key is locked.
    """CREATE FUNCTION sg_route_for_update(p_key text)
        RETURNS TABLE (data text, platform text, chat_type text, chat_id text,
            thread_id text, participant_id text, key_locked boolean)
        LANGUAGE plpgsql AS $$
    BEGIN
        RETURN QUERY SELECT r.data::text, r.platform, r.chat_type, r.chat_id, r.thread_id,
            r.participant_id, false FROM routes r WHERE r.session_key = p_key FOR UPDATE;
        IF FOUND THEN
            RETURN;
        END IF;
        PERFORM pg_advisory_xact_lock(hashtextextended('route:' || p_key, 0));
        RETURN QUERY SELECT r.data::text, r.platform, r.chat_type, r.chat_id, r.thread_id,
            r.participant_id, true FROM routes r WHERE r.session_key = p_key FOR UPDATE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT NULL::text, NULL::text, NULL::text, NULL::text, NULL::text,
                NULL::text, true;
        END IF;
    END $$""",
]

MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (1, "routes, sessions, transcript tree with search, aliases, tombstones, gateway work", _V1),
    (2, "instances, lane leases with epochs, leader leases", _V2),
    (3, "platform event claims, pairing, thread participation, sends", _V3),
    (4, "the per-lane writer lock, the liveness lock of instances", _V4),
    (5, "the writer session of each instance", _V5),
    (6, "the lane fence and a reply's journal step as statements that fail their transaction", _V6),
    (7, "a route written over as seen, checked at the server", _V7),
    (8, "time conversions the planner inlines", _V8),
    (9, "platform receiver cursors", _V9),
    (10, "erasure receipts", _V10),
    (11, "scheduled jobs and their claimed slots", _V11),
    (12, "tool calls waiting for approval", _V12),
    (13, "deliveries: every outbound message and its outcome", _V13),
    (14, "the outbox of outbound webhook events", _V14),
    (15, "lanes an operator took over", _V15),
    (16, "delivery ids of inbound webhooks", _V16),
    (17, "a turn's entries and a route read for writing, each in one round trip", _V17),
]
