"""Lane and leader leases with epochs, and the instance registry, on the database's clock.

Every function runs inside the caller's transaction. The rules (Temporal's range-id fencing,
per lane; see `research/scaleout.md`):
- a claim succeeds only on a free or expired lease, and raises the epoch, which fences every
  earlier owner;
- a renewal touches only leases that have not expired, so an expired lease is claimed again
  under a new epoch, never revived;
- `fence_lane` is the first statement of a fenced transaction: it renews the lease at the
  caller's epoch or fails the transaction, and its row lock lasts to the commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "claim_lane",
    "claim_leader",
    "drop_liveness",
    "fence_lane",
    "heartbeat",
    "hold_leader",
    "hold_liveness",
    "lane_in_flight",
    "lanes_wanting_owner",
    "list_instances",
    "lock_lane",
    "mark_dead",
    "nudge_lane_owner",
    "reap_vanished",
    "register_instance",
    "release_lane",
    "release_leader",
    "stop_instance",
]


class Executes(Protocol):
    """A connection, or a cursor of the writer's pipeline whose answers nobody waits for."""

    def execute(self, query: Any, params: Any = ..., /) -> Any: ...


# A claim never waits: a lease row locked by its owner's fenced commit (or by a paused owner
# in the middle of one) is skipped, and the sweep asks again later, so a pause cannot stall
# the claimer's one writer connection, and with it every other lane of that instance. A lease
# the claimer already owns is taken again at a new epoch: it claims only lanes it does not
# know it holds, so that is a claim whose answer its connection lost (its heartbeat would
# renew that lease forever, and no one else could take the lane).
_CLAIM_LANE = """
UPDATE lane_lease SET owner = %(owner)s, epoch = epoch + 1,
    expires_at = now() + make_interval(secs => %(ttl)s)
WHERE session_key = (
    SELECT session_key FROM lane_lease
    WHERE session_key = %(key)s
      AND (owner IS NULL OR expires_at <= now() OR owner = %(owner)s)
    FOR UPDATE SKIP LOCKED)
RETURNING epoch
"""
_CLAIM_NEW_LANE = """
INSERT INTO lane_lease (session_key, owner, epoch, expires_at)
VALUES (%(key)s, %(owner)s, 1, now() + make_interval(secs => %(ttl)s))
ON CONFLICT (session_key) DO NOTHING
RETURNING epoch
"""
_LOCK_LANE = """
INSERT INTO lane_seq AS s (session_key, next_seq) VALUES (%s, 1)
ON CONFLICT (session_key) DO UPDATE SET next_seq = s.next_seq + 1
"""
# Lanes with work (a waiting row, a turn cut off or left for resume) and no live owner, or
# owned here (a worker of this instance may have left while it still held the lease). Random
# order: the survivors of a dead instance spread its lanes instead of all taking the first.
_WANTING_OWNER = """
SELECT w.session_key FROM (
    SELECT DISTINCT session_key FROM inbox WHERE state = 'pending'
    UNION
    SELECT session_key FROM turns WHERE state IN ('accepted', 'running')
) w LEFT JOIN lane_lease l ON l.session_key = w.session_key
WHERE l.owner IS NULL OR l.expires_at <= now() OR l.owner = %(owner)s
ORDER BY random() LIMIT %(limit)s
"""
# Instances whose heartbeat is late and whose liveness lock is free: their process is gone.
# The lock is tried last, and only on rows that passed the rest (a CASE keeps the order).
# Not in the first `grace` seconds after the server started (`Ownership.restart_grace`): a
# restart ends every session, every liveness lock goes with them, and a free one then means a
# listener not connected again yet, not a process gone (the TTL decides meanwhile). A crash of
# one server process resets every session without a new start time: there the probe can
# still reap live instances, which rejoin under new ids (their writes stay fenced).
_VANISHED = """
UPDATE instances SET state = 'dead'
WHERE state = 'live' AND probe_ready AND instance_id <> %(me)s
  AND pg_postmaster_start_time() < now() - make_interval(secs => %(grace)s)
  AND CASE WHEN heartbeat_at < now() - make_interval(secs => %(late)s) THEN
      pg_try_advisory_xact_lock(hashtextextended('sessiongate:instance:' || instance_id, 0))
      ELSE false END
RETURNING instance_id
"""
_IN_FLIGHT = """
SELECT id FROM turns
WHERE session_key = %s AND state IN ('accepted', 'running', 'replied') ORDER BY id
"""
_NUDGE = """
SELECT pg_notify('sg_' || owner, session_key) FROM lane_lease
WHERE session_key = %(key)s AND owner IS NOT NULL AND owner <> %(me)s AND expires_at > now()
"""
# The lane is given up only when nothing waits on it, checked under the lease's row lock.
_RELEASE_LANE = """
UPDATE lane_lease SET owner = NULL, expires_at = NULL
WHERE session_key = %(key)s AND owner = %(owner)s AND epoch = %(epoch)s
  AND NOT EXISTS (SELECT 1 FROM inbox WHERE session_key = %(key)s AND state = 'pending')
"""
_RENEW_LANES = """
UPDATE lane_lease SET expires_at = now() + make_interval(secs => %(ttl)s)
WHERE owner = %(owner)s AND expires_at > now()
"""
_BEAT = """
UPDATE instances SET heartbeat_at = now(), backend_pid = pg_backend_pid()
WHERE instance_id = %s AND state = 'live'
"""
# The writer sessions of instances just declared dead. A session that started after the last
# heartbeat is not theirs (a server process id is reused only once its session has ended).
_END_WRITERS = """
SELECT pg_terminate_backend(a.pid, 2000) FROM pg_stat_activity a
JOIN instances i ON a.pid = i.backend_pid AND a.backend_start <= i.heartbeat_at
WHERE i.instance_id = ANY(%s::text[]) AND a.pid <> pg_backend_pid()
"""
_END_STALE_WRITERS = """
SELECT pg_terminate_backend(a.pid, 2000) FROM pg_stat_activity a
JOIN instances i ON a.pid = i.backend_pid AND a.backend_start <= i.heartbeat_at
WHERE i.state = 'live' AND i.heartbeat_at < now() - make_interval(secs => %s)
  AND a.pid <> pg_backend_pid()
"""
# Long enough for every instance's listener to connect again after a restart (it retries
# within a second, `wakeups.py`), and shorter than a lease TTL.
# A leader renews its own lease at the same epoch, or takes a free or expired one (epoch + 1).
_CLAIM_LEADER = """
INSERT INTO leader_lease AS l (name, owner, epoch, expires_at)
VALUES (%(name)s, %(owner)s, 1, now() + make_interval(secs => %(ttl)s))
ON CONFLICT (name) DO UPDATE
    SET owner = excluded.owner, expires_at = excluded.expires_at,
        epoch = CASE WHEN l.owner = excluded.owner AND l.expires_at > now()
                     THEN l.epoch ELSE l.epoch + 1 END
    WHERE l.owner IS NULL OR l.expires_at <= now()
       OR (l.owner = excluded.owner AND l.expires_at > now())
RETURNING epoch
"""
_HOLD_LEADER = """
UPDATE leader_lease SET expires_at = now() + make_interval(secs => %(ttl)s)
WHERE name = %(name)s AND owner = %(owner)s AND epoch = %(epoch)s AND expires_at > now()
"""
_INSTANCES = """
SELECT i.instance_id, i.host, i.pid, sg_us(i.started_at), sg_us(i.heartbeat_at), i.state,
       sg_us(now()),
       (SELECT count(*) FROM lane_lease l WHERE l.owner = i.instance_id AND l.expires_at > now()),
       (SELECT coalesce(array_agg(name ORDER BY name), '{}') FROM leader_lease r
        WHERE r.owner = i.instance_id AND r.expires_at > now())
FROM instances i ORDER BY i.started_at, i.instance_id
"""


def register_instance(conn: psycopg.Connection[Any], instance_id: str, host: str, pid: int) -> None:
    conn.execute(
        "INSERT INTO instances (instance_id, host, pid, backend_pid) "
        "VALUES (%s, %s, %s, pg_backend_pid())",
        (instance_id, host, pid),
    )


def heartbeat(conn: psycopg.Connection[Any], instance_id: str, ttl: float) -> int:
    """Renew the instance and every lease it still holds; returns how many leases. A dead or
    stopped instance renews nothing (-1): it must stop claiming and say so."""
    if conn.execute(_BEAT, (instance_id,)).rowcount != 1:
        return -1
    return conn.execute(_RENEW_LANES, {"owner": instance_id, "ttl": ttl}).rowcount


def stop_instance(conn: psycopg.Connection[Any], instance_id: str) -> None:
    """A clean stop: every lease it holds expires now, so successors need not wait a TTL."""
    conn.execute("UPDATE instances SET state = 'stopped' WHERE instance_id = %s", (instance_id,))
    conn.execute("UPDATE lane_lease SET expires_at = now() WHERE owner = %s", (instance_id,))
    conn.execute("UPDATE leader_lease SET expires_at = now() WHERE owner = %s", (instance_id,))


def mark_dead(conn: psycopg.Connection[Any], stale_after: float) -> list[str]:
    """Instances whose heartbeat is older than `stale_after` seconds become dead and their
    leases expire now; the takeover still raises each epoch."""
    # Their writer sessions end first: one paused inside a transaction may hold the very
    # instance row this update takes (a pipelined transaction never counts as "idle in
    # transaction", so the server's timeout would not end it).
    conn.execute(_END_STALE_WRITERS, (stale_after,)).fetchall()
    rows = conn.execute(
        "UPDATE instances SET state = 'dead' WHERE state = 'live' "
        "AND heartbeat_at < now() - make_interval(secs => %s) RETURNING instance_id",
        (stale_after,),
    ).fetchall()
    dead = [r[0] for r in rows]
    if dead:
        _expire_leases_of(conn, dead)
    return dead


def hold_liveness(conn: psycopg.Connection[Any], instance_id: str) -> None:
    """On the instance's own long-lived connection: the session lock whose release (the
    process gone, its socket closed) tells the others at once; then say it is held."""
    conn.execute(
        "SELECT pg_advisory_lock(hashtextextended('sessiongate:instance:' || %s, 0))",
        (instance_id,),
    )
    conn.execute("UPDATE instances SET probe_ready = true WHERE instance_id = %s", (instance_id,))


def drop_liveness(conn: psycopg.Connection[Any], instance_id: str) -> None:
    conn.execute(
        "SELECT pg_advisory_unlock(hashtextextended('sessiongate:instance:' || %s, 0))",
        (instance_id,),
    )


def _expire_leases_of(conn: psycopg.Connection[Any], dead: list[str]) -> None:
    conn.execute("UPDATE lane_lease SET expires_at = now() WHERE owner = ANY(%s::text[])", (dead,))
    conn.execute(
        "UPDATE leader_lease SET expires_at = now() WHERE owner = ANY(%s::text[])", (dead,)
    )


def reap_vanished(conn: psycopg.Connection[Any], me: str, late: float, grace: float) -> list[str]:
    """Instances with a heartbeat `late` seconds old whose process is gone become dead, and
    their leases expire now (a takeover still raises each epoch); none in the first `grace`
    seconds after the server started."""
    params = {"me": me, "late": late, "grace": grace}
    rows = conn.execute(_VANISHED, params).fetchall()
    dead = [r[0] for r in rows]
    if dead:
        # Its liveness lock is free, but its writer may live on (only that other connection
        # was cut): end it, so its row locks hold neither these updates nor a successor.
        conn.execute(_END_WRITERS, (dead,)).fetchall()
        _expire_leases_of(conn, dead)
    return dead


def claim_lane(conn: psycopg.Connection[Any], key: str, owner: str, ttl: float) -> int | None:
    """The lane's new epoch, or None. Each statement is whole on its own, so the claim needs
    no transaction around it: a row another instance makes between the two is its claim,
    and the insert then does nothing."""
    params = {"key": key, "owner": owner, "ttl": ttl}
    row = conn.execute(_CLAIM_LANE, params).fetchone()
    if row is None:
        # No free row: the lane may have none yet (its first claim), or a live owner.
        row = conn.execute(_CLAIM_NEW_LANE, params).fetchone()
    return None if row is None else int(row[0])


def lock_lane(run: Executes, key: str) -> None:
    """Take the lane's writer lock (to the end of the transaction); nothing to read back."""
    run.execute(_LOCK_LANE, (key,))


def lanes_wanting_owner(conn: psycopg.Connection[Any], owner: str, limit: int) -> list[str]:
    rows = conn.execute(_WANTING_OWNER, {"owner": owner, "limit": limit}).fetchall()
    return [r[0] for r in rows]


def lane_in_flight(conn: psycopg.Connection[Any], key: str) -> list[int]:
    """The lane's turns a crash or a lost lease can leave unfinished (accepted, running,
    replied), oldest first."""
    return [int(r[0]) for r in conn.execute(_IN_FLIGHT, (key,)).fetchall()]


def nudge_lane_owner(conn: psycopg.Connection[Any], key: str, me: str) -> bool:
    """Tell the lane's live owner (another instance) that work waits: a hint, sent at commit."""
    return conn.execute(_NUDGE, {"key": key, "me": me}).fetchone() is not None


def fence_lane(run: Executes, key: str, owner: str, epoch: int, ttl: float) -> None:
    """Renew the lease at `epoch`, or fail the transaction (`_errors.LEASE_LOST`): sent with
    the statements after it, its answer is never waited for on its own."""
    run.execute("SELECT sg_fence_lane(%s, %s, %s, %s)", (key, owner, epoch, ttl))


def release_lane(conn: psycopg.Connection[Any], key: str, owner: str, epoch: int) -> bool:
    # The accepts' lock first, then the check in a statement of its own: its snapshot is
    # taken after every accept that held the lock has committed.
    conn.execute("SELECT 1 FROM lane_seq WHERE session_key = %s FOR UPDATE", (key,))
    params = {"key": key, "owner": owner, "epoch": epoch}
    return conn.execute(_RELEASE_LANE, params).rowcount == 1


def claim_leader(conn: psycopg.Connection[Any], name: str, owner: str, ttl: float) -> int | None:
    row = conn.execute(_CLAIM_LEADER, {"name": name, "owner": owner, "ttl": ttl}).fetchone()
    return None if row is None else int(row[0])


def hold_leader(
    conn: psycopg.Connection[Any], name: str, owner: str, epoch: int, ttl: float
) -> bool:
    params = {"name": name, "owner": owner, "epoch": epoch, "ttl": ttl}
    return conn.execute(_HOLD_LEADER, params).rowcount == 1


def release_leader(conn: psycopg.Connection[Any], name: str, owner: str, epoch: int) -> bool:
    return (
        conn.execute(
            "UPDATE leader_lease SET owner = NULL, expires_at = NULL "
            "WHERE name = %s AND owner = %s AND epoch = %s",
            (name, owner, epoch),
        ).rowcount
        == 1
    )


def list_instances(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    rows = conn.execute(_INSTANCES).fetchall()
    return [
        {
            "instance_id": r[0],
            "host": r[1],
            "pid": r[2],
            "started_at_us": r[3],
            "heartbeat_at_us": r[4],
            "state": r[5],
            "heartbeat_age_s": round((r[6] - r[4]) / 1e6, 3),
            "lanes": int(r[7]),
            "leader_of": list(r[8]),
        }
        for r in rows
    ]
