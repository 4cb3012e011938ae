"""Numbered migrations, applied at open, each in one transaction; applied ones are never edited.

Times in columns are integer microseconds since the epoch (UTC) so they compare and sort as
numbers; JSON payloads carry ISO-8601 text.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

_V1 = [
    """CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID""",
    # One row per session key: the routing entry. `data` is the whole SessionEntry as JSON;
    # the other columns are derived from it in one function and exist to be filtered and sorted.
    """CREATE TABLE routes (
        session_key TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        platform TEXT,
        chat_type TEXT NOT NULL,
        chat_id TEXT,
        thread_id TEXT,
        participant_id TEXT,
        updated_at INTEGER NOT NULL,
        pinned_at INTEGER,
        archived_at INTEGER,
        suspended INTEGER NOT NULL DEFAULT 0,
        resume_pending INTEGER NOT NULL DEFAULT 0,
        label TEXT,
        data TEXT NOT NULL
    ) WITHOUT ROWID""",
    "CREATE INDEX routes_session_id ON routes(session_id)",
    "CREATE INDEX routes_updated ON routes(updated_at)",
    "CREATE UNIQUE INDEX routes_label ON routes(label) WHERE label IS NOT NULL",
    # One row per session incarnation (session id).
    """CREATE TABLE sessions (
        sid INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL UNIQUE,
        session_key TEXT,
        parent_session_id TEXT,
        started_at INTEGER NOT NULL,
        ended_at INTEGER,
        end_reason TEXT,
        generation INTEGER NOT NULL DEFAULT 0,
        header TEXT NOT NULL
    )""",
    "CREATE INDEX sessions_key ON sessions(session_key, started_at)",
    # The transcript tree. `depth` is the distance from the root and `mdepth` the number of
    # messages on the way there (a branch's message count without a walk); `on_path` marks the
    # materialised active path, so the last page is one index range scan and the active leaf is
    # its deepest entry (no leaf column to keep in step on every append). `sid` has no
    # foreign-key clause: the check would cost a lookup per append, and entries are only ever
    # written under a session row the same transaction just read.
    """CREATE TABLE entries (
        id INTEGER PRIMARY KEY,
        sid INTEGER NOT NULL,
        parent_id INTEGER,
        depth INTEGER NOT NULL,
        mdepth INTEGER NOT NULL,
        on_path INTEGER NOT NULL DEFAULT 1,
        type TEXT NOT NULL,
        role TEXT,
        content TEXT,
        payload TEXT,
        ts INTEGER NOT NULL,
        idem TEXT
    )""",
    "CREATE INDEX entries_path ON entries(sid, on_path, depth)",
    "CREATE UNIQUE INDEX entries_idem ON entries(sid, idem) WHERE idem IS NOT NULL",
    # Childless entries off the active path (the active leaf is on the sessions row).
    """CREATE TABLE tips (
        sid INTEGER NOT NULL REFERENCES sessions(sid) ON DELETE CASCADE,
        entry_id INTEGER NOT NULL,
        PRIMARY KEY (sid, entry_id)
    ) WITHOUT ROWID""",
    """CREATE TABLE identity_aliases (
        platform TEXT NOT NULL,
        alias TEXT NOT NULL,
        canonical TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (platform, alias)
    ) WITHOUT ROWID""",
    """CREATE TABLE tombstones (
        session_key TEXT PRIMARY KEY,
        deleted_at INTEGER NOT NULL,
        reason TEXT NOT NULL
    ) WITHOUT ROWID""",
]

# The full-text index is a side index over message text, filled from `entries` by a cursor
# (meta `fts_cursor`) off the append path; search joins it with the active path.
_V2 = [
    "CREATE VIRTUAL TABLE entries_fts USING fts5(content, content='entries', content_rowid='id')",
    "INSERT INTO meta (key, value) VALUES ('fts_cursor', '0')",
]

# The gateway's durable work (DESIGN decisions 3 and 4). `inbox` holds accepted inbound messages
# until the outcome of their turn commits: `slot` rows collect follow-ups by merging (at most one
# pending slot per lane, enforced by the partial unique index), `queued` rows are `/queue` items,
# one turn each. A row is claimed (state `claimed`, `turn_id` set) in the transaction that
# journals its turn and deleted in the transaction that commits the outcome, never before.
# `inbound_seen` deduplicates by (platform, chat id, message id) and remembers where each message
# went. `turns` is the journal (accepted -> running -> replied -> delivered | failed |
# interrupted). `restart_counts` mirrors `restart_counts.json`: resumes dispatched per key.
# Inbox and turn ids are AUTOINCREMENT, never reused after a delete or a prune: dedup records
# point at inbox ids, and a turn id is the idempotency key of the turn's transcript rows.
_V3 = [
    """CREATE TABLE inbox (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_key TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('slot', 'queued')),
        state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'claimed')),
        turn_id INTEGER,
        text TEXT NOT NULL,
        parts TEXT NOT NULL,
        media TEXT NOT NULL DEFAULT '[]',
        message_id TEXT,
        message_ids TEXT NOT NULL DEFAULT '[]',
        source TEXT NOT NULL,
        message_type TEXT NOT NULL,
        reply_to TEXT,
        event_kind TEXT,
        internal INTEGER NOT NULL DEFAULT 0,
        accepted_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    )""",
    "CREATE INDEX inbox_lane ON inbox(session_key, state, id)",
    "CREATE UNIQUE INDEX inbox_one_slot ON inbox(session_key) "
    "WHERE kind = 'slot' AND state = 'pending'",
    """CREATE TABLE inbound_seen (
        platform TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        session_key TEXT NOT NULL,
        session_id TEXT,
        inbox_id INTEGER,
        turn_id INTEGER,
        status TEXT NOT NULL,
        reply TEXT,
        seen_at INTEGER NOT NULL,
        PRIMARY KEY (platform, chat_id, message_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX inbound_seen_inbox ON inbound_seen(inbox_id) WHERE inbox_id IS NOT NULL",
    "CREATE INDEX inbound_seen_at ON inbound_seen(seen_at)",
    """CREATE TABLE turns (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_key TEXT NOT NULL,
        session_id TEXT NOT NULL,
        inbox_id INTEGER,
        state TEXT NOT NULL CHECK (state IN
            ('accepted', 'running', 'replied', 'delivered', 'failed', 'interrupted')),
        attempt INTEGER NOT NULL DEFAULT 1,
        resumes INTEGER NOT NULL DEFAULT 0,
        source TEXT NOT NULL,
        reply TEXT,
        error TEXT,
        accepted_at INTEGER NOT NULL,
        started_at INTEGER,
        finished_at INTEGER,
        delivered_at INTEGER
    )""",
    "CREATE INDEX turns_state ON turns(state)",
    "CREATE INDEX turns_key ON turns(session_key, id)",
    """CREATE TABLE restart_counts (
        session_key TEXT PRIMARY KEY,
        count INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    ) WITHOUT ROWID""",
]

# Inbound dedup is scoped to the lane and the sender: platform message ids are only unique per
# chat (and API clients pick their own), so a record keyed by (platform, chat, id) alone let
# Bob's message "1" in a per-user group pass for Alice's "1" and answered him with her lane's
# receipt. The record now also names the lane (`session_key`, which holds the thread) and the
# sender (`sender_id`, the source's participant id, '' for none), and keeps a fingerprint of the
# content (`content_hash`) so a reused id with different text is refused, not taken for a
# redelivery. Old records get their sender from the turn or inbox row they point at (the
# source stored there); a record with neither keeps '' and no fingerprint, so at worst one
# retry across the upgrade runs as a new message, and never in another lane.
_V4 = [
    """CREATE TABLE inbound_seen_v4 (
        platform TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        session_key TEXT NOT NULL,
        sender_id TEXT NOT NULL,
        content_hash TEXT,
        session_id TEXT,
        inbox_id INTEGER,
        turn_id INTEGER,
        status TEXT NOT NULL,
        reply TEXT,
        seen_at INTEGER NOT NULL,
        PRIMARY KEY (platform, chat_id, message_id, session_key, sender_id)
    ) WITHOUT ROWID""",
    """INSERT OR IGNORE INTO inbound_seen_v4 (platform, chat_id, message_id, session_key,
        sender_id, content_hash, session_id, inbox_id, turn_id, status, reply, seen_at)
    SELECT s.platform, s.chat_id, s.message_id, s.session_key,
        coalesce(
            json_extract(coalesce(t.source, i.source), '$.user_id_alt'),
            json_extract(coalesce(t.source, i.source), '$.user_id'),
            ''),
        NULL, s.session_id, s.inbox_id, s.turn_id, s.status, s.reply, s.seen_at
    FROM inbound_seen AS s
    LEFT JOIN turns AS t ON t.id = s.turn_id
    LEFT JOIN inbox AS i ON i.id = s.inbox_id""",
    "DROP TABLE inbound_seen",
    "ALTER TABLE inbound_seen_v4 RENAME TO inbound_seen",
    "CREATE INDEX inbound_seen_inbox ON inbound_seen(inbox_id) WHERE inbox_id IS NOT NULL",
    "CREATE INDEX inbound_seen_at ON inbound_seen(seen_at)",
]

# Usage counters belong to an incarnation: the routing entry holds the current one's, and this
# column keeps a left incarnation's (JSON, `core.entry.INCARNATION_COUNTERS`) until the key
# resumes it. NULL: never left (or left before this column), which reads as fresh counters.
_V5 = ["ALTER TABLE sessions ADD COLUMN counters TEXT"]

# Every routing write moves `updated_at` (each message, each turn's outcome), and its index
# cost two of the ~five pages such a commit writes, a fifth of creating a conversation. Only
# rare whole-table reads used it (a full listing, the startup scan for recently active
# lanes), and the paged listing sorts by an expression it cannot serve anyway: they scan.
_V6 = ["DROP INDEX routes_updated"]


# What platform adapters keep (DESIGN decision 13). `platform_events` holds one claim per
# platform event id, committed before the adapter awaits anything for the event: `owner` is the
# claiming process's boot id, so a claim left `claimed` by a process that died is taken over at
# the redelivery instead of being read as a duplicate. `pairing` holds one row per DM sender
# asking for access (at most one live code each) and the approvals. `platform_threads` remembers
# the threads the bot has spoken in (no mention needed there). `platform_sends` records what was
# sent per turn (`sending` is written before the request leaves), so a reply sent again after a
# crash is dropped, a send a crash interrupted is settled as unconfirmed, and an unconfirmed or
# refused send is never resent blindly.
_V7 = [
    """CREATE TABLE platform_events (
        platform TEXT NOT NULL,
        event_id TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('claimed', 'done')),
        owner TEXT NOT NULL,
        claimed_at INTEGER NOT NULL,
        PRIMARY KEY (platform, event_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX platform_events_at ON platform_events(claimed_at)",
    """CREATE TABLE pairing (
        platform TEXT NOT NULL,
        user_id TEXT NOT NULL,
        code TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        user_name TEXT,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        approved_at INTEGER,
        PRIMARY KEY (platform, user_id)
    ) WITHOUT ROWID""",
    "CREATE UNIQUE INDEX pairing_code ON pairing(code)",
    """CREATE TABLE platform_threads (
        platform TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        thread_id TEXT NOT NULL,
        joined_at INTEGER NOT NULL,
        PRIMARY KEY (platform, chat_id, thread_id)
    ) WITHOUT ROWID""",
    """CREATE TABLE platform_sends (
        platform TEXT NOT NULL,
        turn_id INTEGER NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('sending', 'sent', 'unconfirmed', 'refused')),
        detail TEXT,
        at INTEGER NOT NULL,
        PRIMARY KEY (platform, turn_id)
    ) WITHOUT ROWID""",
]

# `routes` becomes an ordinary rowid table whose key is a unique index. As a WITHOUT ROWID
# table it was one index b-tree holding whole rows (~370 bytes each), interior pages included,
# so it was three levels deep at a few thousand lanes and a new lane's insert at a random key
# rebalanced three or four pages: a new conversation's commit wrote ~4 pages for its one route.
# Now the row is appended at the end of the table and only the key (~40 bytes) goes into the
# key's index at a random place; a lookup by key costs one more descent, into a shallow tree.
_ROUTE_COLUMNS = (
    "session_key, session_id, platform, chat_type, chat_id, thread_id, participant_id, "
    "updated_at, pinned_at, archived_at, suspended, resume_pending, label, data"
)
_V8 = [
    """CREATE TABLE routes_v8 (
        session_key TEXT NOT NULL,
        session_id TEXT NOT NULL,
        platform TEXT,
        chat_type TEXT NOT NULL,
        chat_id TEXT,
        thread_id TEXT,
        participant_id TEXT,
        updated_at INTEGER NOT NULL,
        pinned_at INTEGER,
        archived_at INTEGER,
        suspended INTEGER NOT NULL DEFAULT 0,
        resume_pending INTEGER NOT NULL DEFAULT 0,
        label TEXT,
        data TEXT NOT NULL
    )""",
    f"INSERT INTO routes_v8 ({_ROUTE_COLUMNS}) SELECT {_ROUTE_COLUMNS} FROM routes",  # noqa: S608
    "DROP TABLE routes",
    "ALTER TABLE routes_v8 RENAME TO routes",
    "CREATE UNIQUE INDEX routes_key ON routes(session_key)",
    "CREATE INDEX routes_session_id ON routes(session_id)",
    "CREATE UNIQUE INDEX routes_label ON routes(label) WHERE label IS NOT NULL",
]

# A receiver's cursor that is not a platform event id (Matrix's `/sync` `since` token), per
# platform and account: written only after the batch it follows was durably accepted, so a
# restart resumes where the last accepted batch ended (DESIGN decision 13).
_V9 = [
    """CREATE TABLE platform_cursors (
        platform TEXT NOT NULL,
        account TEXT NOT NULL,
        cursor TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (platform, account)
    ) WITHOUT ROWID""",
]

# The audit trail of right-to-erasure requests (`store/erasure.py`): one receipt per request,
# naming the person only by an HMAC of `<platform>:<user_id>` under the home's salt (meta
# `erasure_salt`), with what was removed (`counts`, JSON).
_V10 = [
    """CREATE TABLE erasures (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        erased_at INTEGER NOT NULL,
        subject_hash TEXT NOT NULL,
        counts TEXT NOT NULL
    )""",
    "CREATE INDEX erasures_subject ON erasures(subject_hash)",
]

# Scheduled jobs (`store/jobs.py`): the job as JSON with a paused flag and the cursor of the
# latest slot dealt with; and one row per claimed slot, unique per (job, slot): the claim that
# makes a slot run exactly once, committed before its turn is accepted.
_V11 = [
    """CREATE TABLE jobs (
        job_id TEXT PRIMARY KEY,
        spec TEXT NOT NULL,
        paused INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        cursor_at INTEGER
    ) WITHOUT ROWID""",
    """CREATE TABLE job_runs (
        run_id INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT NOT NULL,
        slot_at INTEGER NOT NULL,
        claimed_at INTEGER NOT NULL,
        owner TEXT NOT NULL,
        state TEXT NOT NULL,
        session_key TEXT,
        turn_id INTEGER,
        skipped INTEGER NOT NULL DEFAULT 0,
        detail TEXT,
        UNIQUE (job_id, slot_at)
    )""",
    "CREATE INDEX job_runs_unfinished ON job_runs(state) WHERE state != 'accepted'",
    "CREATE INDEX job_runs_turn ON job_runs(turn_id) WHERE turn_id IS NOT NULL",
]

# Tool calls waiting for a person's approval (`store/approvals.py`): one row per call of a
# turn, with the exact arguments shown and their SHA-256; a decision is one conditional update
# from `pending`, so two presses make one decision.
_V12 = [
    """CREATE TABLE approvals (
        id TEXT PRIMARY KEY,
        turn_id INTEGER NOT NULL,
        call_id TEXT NOT NULL,
        session_key TEXT NOT NULL,
        tool TEXT NOT NULL,
        arguments TEXT NOT NULL,
        arguments_sha256 TEXT NOT NULL,
        approvers TEXT NOT NULL,
        status TEXT NOT NULL,
        requested_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        decided_at INTEGER,
        decided_by TEXT,
        used INTEGER NOT NULL DEFAULT 0,
        UNIQUE (turn_id, call_id)
    )""",
    "CREATE INDEX approvals_pending ON approvals(status, session_key)",
]

# Every outbound message is a row (`store/deliveries.py`, DESIGN decision 19): `pending` until
# the platform confirms it (`sent`, with its message id), `failed` with the platform's reason
# and the time of the next try, `dead` after the last try or when it is older than
# `delivery.max_age`. A turn has at most one reply delivery.
_V13 = [
    """CREATE TABLE deliveries (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        turn_id INTEGER,
        session_key TEXT,
        platform TEXT NOT NULL,
        source TEXT NOT NULL,
        text TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'sent', 'failed', 'dead')),
        attempts INTEGER NOT NULL DEFAULT 0,
        message_id TEXT,
        reason TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        next_at INTEGER NOT NULL
    )""",
    "CREATE UNIQUE INDEX deliveries_reply ON deliveries(turn_id) WHERE kind = 'reply'",
    "CREATE INDEX deliveries_status ON deliveries(status, next_at)",
]

# Outbound webhook events (`store/outbox.py`): written in the transaction whose change they
# tell, so none is lost to a crash; sent in `id` order per receiver and session, `sent` or
# `dead` after their tries. `event_id` is the receiver's key to drop a repeat.
_V14 = [
    """CREATE TABLE webhook_outbox (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL UNIQUE,
        target TEXT NOT NULL,
        event TEXT NOT NULL,
        session_key TEXT,
        body TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'sent', 'dead')),
        attempts INTEGER NOT NULL DEFAULT 0,
        reason TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        next_at INTEGER NOT NULL
    )""",
    "CREATE INDEX webhook_outbox_status ON webhook_outbox(status, id)",
]

# Lanes an operator took over (`store/takeover.py`): one row per session key while the agent
# does not answer it; who took it over, since when, and when it goes back by itself (NULL:
# only when handed back).
_V15 = [
    """CREATE TABLE takeovers (
        session_key TEXT PRIMARY KEY,
        taken_by TEXT NOT NULL,
        since INTEGER NOT NULL,
        resume_at INTEGER
    ) WITHOUT ROWID""",
]

# Delivery ids inbound webhook routes took (`store/hook_receipts.py`): a repeat of one is
# not run again; housekeeping forgets them after `hooks.dedupe_hours`.
_V16 = [
    """CREATE TABLE hook_receipts (
        route TEXT NOT NULL,
        delivery_id TEXT NOT NULL,
        received_at INTEGER NOT NULL,
        turn_id INTEGER,
        session_key TEXT,
        PRIMARY KEY (route, delivery_id)
    )""",
    "CREATE INDEX hook_receipts_received ON hook_receipts(received_at)",
]

MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (1, "routes, sessions, transcript tree, aliases, tombstones", _V1),
    (2, "full-text side index", _V2),
    (3, "gateway inbox, inbound dedup, turn journal, restart counts", _V3),
    (4, "inbound dedup scoped to lane and sender, with a content fingerprint", _V4),
    (5, "usage counters saved per session incarnation", _V5),
    (6, "routing writes keep no index on updated_at", _V6),
    (7, "platform event claims, pairing, thread participation, sends", _V7),
    (8, "routes as a rowid table keyed by a unique index", _V8),
    (9, "platform receiver cursors", _V9),
    (10, "erasure receipts", _V10),
    (11, "scheduled jobs and their claimed slots", _V11),
    (12, "tool calls waiting for approval", _V12),
    (13, "deliveries: every outbound message and its outcome", _V13),
    (14, "the outbox of outbound webhook events", _V14),
    (15, "lanes an operator took over", _V15),
    (16, "delivery ids of inbound webhooks", _V16),
]
