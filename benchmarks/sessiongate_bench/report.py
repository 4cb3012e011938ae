"""Issue 5's goals as pass/fail lines, the ratios, and `docs/PERFORMANCE.md`.

Everything here reads the results dictionary only, so a report can be rebuilt from a saved
`--json` file. The markdown keeps whatever sits between the notes markers of the previous file:
that is where the store's owner records what was tried and what it gave. Past the ~400-line
budget: every table of the report is here, so the markdown reads top to bottom as the page does.

Over the ~400-line budget: every section's goals and markdown lines meet here, in the order
the report prints them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiongate_bench.agent_kinds import agent_kinds_lines
from sessiongate_bench.instances import instances_lines
from sessiongate_bench.job_burst import job_burst_lines
from sessiongate_bench.pg_store import pg_store_goals, pg_store_lines
from sessiongate_bench.remote_db import remote_db_goals, remote_db_lines
from sessiongate_bench.streaming import streaming_goals
from sessiongate_bench.tree import FULL_SIZES as TREE_SIZES

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["evaluate_goals", "render_markdown", "write_markdown"]

NOTES_START = "<!-- notes:start (kept when the benchmark rewrites this file) -->"
NOTES_END = "<!-- notes:end -->"

# Written as escapes: ruff flags the literal characters as look-alikes of x and -.
X = "\u00d7"
DASH = "\u2013"

SG_DEFAULT = "sessiongate-normal"
SG_FULL = "sessiongate-full"


def _store(results: dict[str, Any], store_id: str) -> dict[str, Any] | None:
    store = results.get("stores", {}).get(store_id)
    if store is None or store.get("status") != "ok":
        return None
    found: dict[str, Any] = store
    return found


def _rate(store: dict[str, Any]) -> float:
    return float(store["workload"]["append"]["msg_per_s"])


def _fresh(store: dict[str, Any]) -> float:
    """Messages per second appended to conversations each created by its first turn (0 for
    results saved before that phase existed)."""
    return float(store["workload"].get("append_new", {}).get("msg_per_s", 0.0))


def _goal(goal: str, measured: str, passed: bool | None) -> dict[str, Any]:
    return {"goal": goal, "measured": measured, "passed": passed}


def _missing(*names: str) -> str:
    return f"not measured ({', '.join(names)} did not run)"


def evaluate_goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each goal of issue 5 with what was measured; `passed` is None when not measured."""
    goals: list[dict[str, Any]] = []
    sg, sg_full = _store(results, SG_DEFAULT), _store(results, SG_FULL)
    openai = _store(results, "openai-agents")

    # Every append commits before it returns; sessiongate's default (NORMAL in WAL) survives a
    # process crash. The ratio at equal FULL durability is shown beside it, with the most any
    # store could reach there: the baseline's own ratio, which the disk's fsync sets.
    goal = f"Durable appends ≥ 10{X} OpenAI SQLiteSession (sessiongate at its default)"
    if sg and openai:
        ratio = _rate(sg) / _rate(openai)
        text = f"{ratio:.1f}{X} ({_n(_rate(sg))} vs {_n(_rate(openai))} msg/s)"
        base_full = _store(results, "sqlite-full")
        if sg_full:
            text += f"; both at FULL: {_rate(sg_full) / _rate(openai):.1f}{X}"
            if base_full:
                text += f" (the FULL baseline: {_rate(base_full) / _rate(openai):.1f}{X})"
        goals.append(_goal(goal, text, ratio >= 10))
    else:
        goals.append(_goal(goal, _missing(SG_DEFAULT, "openai-agents"), None))

    for mine, base in ((sg, "sqlite-normal"), (sg_full, "sqlite-full")):
        level = base.split("-")[1].upper()
        goal = f"Appends ≥ 0.5{X} the plain sqlite3 baseline at synchronous={level}"
        other = _store(results, base)
        if mine and other:
            ratio = _rate(mine) / _rate(other)
            text = f"{ratio:.2f}{X} ({_n(_rate(mine))} vs {_n(_rate(other))} msg/s)"
            goals.append(_goal(goal, text, ratio >= 0.5))
        else:
            goals.append(_goal(goal, _missing(f"sessiongate-{level.lower()}", base), None))

    # A new conversation is the first message of every chat: the same kind of appends, each
    # conversation created by its first turn, against the baseline doing the same (its one
    # `sessions` row written with the first turn).
    for mine, base in ((sg, "sqlite-normal"), (sg_full, "sqlite-full")):
        level = base.split("-")[1].upper()
        goal = (
            f"Appends with conversation creation ≥ 0.6{X} the plain sqlite3 baseline at "
            f"synchronous={level}"
        )
        other = _store(results, base)
        if mine and other and _fresh(mine) and _fresh(other):
            ratio = _fresh(mine) / _fresh(other)
            text = (
                f"{ratio:.2f}{X} ({_n(_fresh(mine))} vs {_n(_fresh(other))} msg/s; without "
                f"creation {_rate(mine) / _rate(other):.2f}{X})"
            )
            goals.append(_goal(goal, text, ratio >= 0.6))
        else:
            goals.append(_goal(goal, _missing(f"sessiongate-{level.lower()}", base), None))

    if sg:
        w = sg["workload"]
        tail = w["tail_50"]
        goals.append(
            _goal(
                "Tail read of the last 50 ≤ 0.5 ms (median)",
                f"{_ms(tail['p50_ms'])} median, {_ms(tail['p99_ms'])} p99",
                tail["p50_ms"] <= 0.5,
            )
        )
        full = w["full_load"]
        goals.append(
            _goal(
                "Full load of a 5,000-message session ≤ 20 ms (median)",
                f"{_ms(full['p50_ms'])} median, {_ms(full['p99_ms'])} p99 "
                f"({full['messages']:,} messages)",
                full["p50_ms"] <= 20 if full["messages"] >= 5000 else None,
            )
        )
        baseline = _store(results, "sqlite-normal")
        goal = f"Bytes per message ≤ 1.3{X} the baseline"
        if baseline:
            mine_b = w["disk"]["bytes_per_message"]
            base_b = baseline["workload"]["disk"]["bytes_per_message"]
            ratio = mine_b / base_b if base_b else float("inf")
            goals.append(
                _goal(goal, f"{ratio:.2f}{X} ({mine_b:,.0f} vs {base_b:,.0f} B)", ratio <= 1.3)
            )
        else:
            goals.append(_goal(goal, _missing("sqlite-normal"), None))
        growth = w["disk"]["growth"]
        goals.append(
            _goal(
                "Linear growth on disk (bytes per message added, 2nd half ÷ 1st half ≤ 1.25)",
                f"{growth:.2f}" if growth is not None else "too few probes",
                growth <= 1.25 if growth is not None else None,
            )
        )
    else:
        goals.extend(
            _goal(name, _missing(SG_DEFAULT), None)
            for name in ("Tail read ≤ 0.5 ms", "Full load ≤ 20 ms", "Bytes per message", "Growth")
        )

    writers = [s for s in (sg, sg_full) if s]
    if writers:
        runs = [
            (store["durability"], mode, w2)
            for store in writers
            for mode, w2 in store["writers"].items()
        ]
        clean = all(bool(w2["clean"]) for _, _, w2 in runs)
        lines = [
            f"{level} {mode}: {w2['errors']}/{w2['lost']}/{w2['duplicated']}"
            for level, mode, w2 in runs
        ]
        goals.append(
            _goal(
                "Two writers: zero errors, lost or duplicated messages (errors/lost/duplicated)",
                "; ".join(lines),
                clean,
            )
        )
    else:
        goals.append(
            _goal("Two writers: zero errors, lost, duplicated", _missing("sessiongate"), None)
        )

    gateway = results.get("gateway", {})
    if gateway.get("status") == "ok":
        inproc = gateway["in_process"]
        goals.append(
            _goal(
                "Gateway ≥ 1,000 turns/s in process",
                f"{_n(inproc['turns_per_s'])} turns/s",
                inproc["turns_per_s"] >= 1000,
            )
        )
        p99 = inproc["overhead_ms"]["p99_ms"]
        goals.append(_goal("Gateway p99 overhead ≤ 5 ms", _ms(p99), p99 <= 5))
        feed = gateway.get("feed")
        if feed:
            goals.append(_feed_goal(feed))
        goals += _postgres_goals(gateway.get("postgres", {}))
        memory = gateway.get("memory")
        if memory:
            known = memory["known_sessions"]
            peak = memory["peak_rss_mb"]
            goals.append(
                _goal(
                    f"Gateway RSS with {known:,} known sessions ≤ {memory['aim_mb']} MB (peak)",
                    f"{peak:.0f} MB",
                    None if results.get("quick") else peak <= memory["aim_mb"],
                )
            )
    else:
        why = f"not measured: {gateway.get('reason', 'no gateway section')}"
        goals.append(_goal("Gateway ≥ 1,000 turns/s in process", why, None))
        goals.append(_goal("Gateway p99 overhead ≤ 5 ms", why, None))
    goals.extend(_tree_goals(results))
    goals.extend(streaming_goals(results))
    goals.extend(remote_db_goals(results))
    goals.extend(pg_store_goals(results))
    goals.append(_telegram_goal(results))
    if results.get("quick"):
        # Quick sizes check that every part of the benchmark runs; figures from them say
        # nothing about the goals, so none is judged (and so none can fail) on them.
        for judged in goals:
            judged["passed"] = None
    return goals


def _postgres_goals(section: dict[str, Any]) -> list[dict[str, Any]]:
    names = ("Gateway on PostgreSQL ≥ 500 turns/s in process", "PostgreSQL round trips ≤ 4 a turn")
    if section.get("status") != "ok":
        why = f"not measured: {section.get('reason', 'no PostgreSQL section')}"
        return [_goal(name, why, None) for name in names]
    inproc = section["in_process"]
    rate, trips = inproc["turns_per_s"], inproc["round_trips_per_turn"]
    first = inproc.get("first_turn", {}).get("round_trips_per_turn")
    of_first = "" if first is None else f"; {first:.2f} for a chat's first turn"
    return [
        _goal(names[0], f"{_n(rate)} turns/s", rate >= 500),
        _goal(names[1], f"{trips:.2f} round trips a turn of a known chat{of_first}", trips <= 4),
    ]


def _postgres_lines(gateway: dict[str, Any]) -> list[str]:
    section = gateway.get("postgres", {})
    if section.get("status") != "ok":
        return [f"- on PostgreSQL: not measured ({section.get('reason', 'no PostgreSQL section')})"]
    pg, lite = section["in_process"], gateway["in_process"]
    return [
        f"- on PostgreSQL, in process: {_n(pg['turns_per_s'])} turns/s (SQLite "
        f"{_n(lite['turns_per_s'])} in the same run; {section['turns']:,} turns over "
        f"{section['chats']:,} chats), overhead {_pair(pg['overhead_ms'])}; per turn of a "
        f"known chat {pg['round_trips_per_turn']:.2f} round trips, "
        f"{pg['statements_per_turn']:.2f} statements, {pg['transactions_per_turn']:.2f} "
        f"transactions (counted from the protocol trace of {pg['sample_turns']} turns"
        f"{_first_turn(pg)}); CPU per turn "
        f"{pg['cpu_ms_per_turn']:.2f} ms in the gateway, {pg['server_cpu_ms_per_turn']:.2f} ms "
        "in the server",
        *_async_commit_line(pg.get("async_commit")),
    ]


def _first_turn(pg: dict[str, Any]) -> str:
    first = pg.get("first_turn")
    if not first:
        return ""
    return (
        f"; a chat's first turn {first['round_trips_per_turn']:.2f} round trips, "
        f"{first['statements_per_turn']:.2f} statements, "
        f"{first['transactions_per_turn']:.2f} transactions"
    )


def _async_commit_line(part: dict[str, Any] | None) -> list[str]:
    if not part:
        return []
    return [
        f"- on PostgreSQL with `synchronous_commit=off` (SQLite's default durability: a commit "
        f"does not wait for the disk): {_n(part['turns_per_s'])} turns/s, overhead "
        f"{_pair(part['overhead_ms'])}, {part['round_trips_per_turn']:.2f} round trips a turn"
    ]


def _feed_goal(feed: dict[str, Any]) -> dict[str, Any]:
    """The live feed keeps up with 1,000 turns/s and 10 subscribers cost ≤ 10 % of the rate."""
    slowdown, aim = feed["slowdown"], feed["aim"]
    measured = (
        f"{_n(feed['turns_per_s_0'])} → {_n(feed['turns_per_s_subscribed'])} turns/s "
        f"({-slowdown:+.1%}; by CPU time {-feed['cpu_slowdown']:+.1%}), {feed['resets']} resets"
    )
    passed = slowdown <= aim and feed["turns_per_s_subscribed"] >= 1000 and feed["resets"] == 0
    subscribers = feed["subscribers"]
    return _goal(
        f"Feed: {subscribers} subscribers at ≥ 1,000 turns/s slow turns ≤ {aim:.0%}",
        measured,
        passed,
    )


def _telegram_goal(results: dict[str, Any]) -> dict[str, Any]:
    label = "Telegram stub → echo agent → sendMessage ≥ 500 updates/s"
    telegram = results.get("telegram", {})
    if telegram.get("status") != "ok":
        return _goal(label, f"not measured: {telegram.get('reason', 'no telegram section')}", None)
    rate = telegram["throughput"]["updates_per_s"]
    return _goal(label, f"{_n(rate)} updates/s", rate >= telegram["aim_updates_per_s"])


_TREE_GOALS = {
    "branches": "Branch listing with {tips} tips ≤ 50 ms",
    "context": "Model context of a {entries}-entry transcript ≤ 20 ms",
    "fork": "Fork of a {fork_prefix}-message prefix ≤ 100 ms",
}


def _tree_goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    tree = results.get("tree", {})
    if tree.get("status") != "ok":
        reason = f"not measured: {tree.get('reason', 'no tree section')}"
        return [_goal(label.format(**TREE_SIZES), reason, None) for label in _TREE_GOALS.values()]
    goals = []
    for name, label in _TREE_GOALS.items():
        measured = tree[name]["median_ms"]
        # The budgets are for the full sizes; a quick run reports them without judging.
        verdict = None if results.get("quick") else measured <= tree["budgets_ms"][name]
        goals.append(_goal(label.format(**tree["sizes"]), _ms(measured), verdict))
    return goals


# ---------------------------------------------------------------------------- markdown


def _n(value: float) -> str:
    """Readable numbers: thousands separators from 100 up, two significant digits below."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2g}" if value < 1 else f"{value:.2f}"


def _ms(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f} ms"
    if value >= 1:
        return f"{value:.1f} ms"
    return f"{value:.3f} ms"


def _table(header: list[str], rows: Iterable[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out.extend("| " + " | ".join(row) + " |" for row in rows)
    return out


def _ok_stores(results: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in results.get("stores", {}).values() if s.get("status") == "ok"]


def _verdict(passed: bool | None) -> str:
    return {True: "PASS", False: "FAIL", None: "n/a"}[passed]


def render_markdown(results: dict[str, Any]) -> str:
    """The whole PERFORMANCE.md except the preserved notes."""
    machine = results["machine"]
    sizes = results["sizes"]
    lines = [
        "# Performance",
        "",
        "Generated by `sessiongate bench` (`benchmarks/README.md` describes the workload and",
        "each contender); do not edit by hand except between the notes markers at the end.",
        "",
    ]
    if results.get("quick"):
        lines += [
            "> **Quick run**: sizes far below issue 5's workload. It checks only that the",
            "> benchmark runs, not how fast anything is, and judges no goal (all n/a); run",
            "> `sessiongate bench` for real figures.",
            "",
        ]
    lines += [
        f"Run {results['finished_at']} on {machine['cpu']}, {machine['cores']} cores, "
        f"{machine['ram_gb']} GB RAM; {machine['os']}; Python {machine['python']}, "
        f"SQLite {machine['sqlite']}. Each store ran in its own processes, one after another.",
        "",
        f"Workload: {sizes['sessions']:,} sessions; {sizes['messages']:,} messages appended in "
        f"turns of 2{DASH}4 to random sessions, one call per turn; one hot session of "
        f"{sizes['hot_messages']:,} messages (LangGraph: 1,000), its last 50 read "
        f"{sizes['tail_reads']:,} times and all of it {sizes['full_reads']} times; "
        f"{sizes['cold_reads']} small sessions opened and read; two writer processes "
        f"({sizes['writer_turns']} turns each). With creation: "
        f"{sizes.get('new_messages', 0):,} messages in turns of 2{DASH}4 to "
        f"{sizes.get('new_sessions', 0):,} new conversations, each created by its first turn "
        "(one call per turn where the store has one).",
        "",
    ]
    if results.get("chart", {}).get("path"):
        lines += [f"![Benchmark chart]({Path(results['chart']['path']).name})", ""]

    lines += ["## Goals (issue 5)", ""]
    lines += _table(
        ["", "goal", "measured"],
        ([_verdict(g["passed"]), g["goal"], g["measured"]] for g in results["goals"]),
    )
    lines.append("")

    stores = _ok_stores(results)
    lines += ["## Writes", ""]
    lines += _table(
        [
            "store",
            "durability",
            "sessions/s",
            "append msg/s",
            "turn p50 / p99",
            "with creation msg/s",
            "first turn p50 / p99",
            "hot msg/s",
        ],
        (
            [
                s["label"],
                _durability(s),
                _n(s["workload"]["sessions"]["per_s"]),
                f"**{_n(s['workload']['append']['msg_per_s'])}**",
                _pair(s["workload"]["append"]["turn_latency"]),
                *_fresh_cells(s),
                _n(s["workload"]["hot"]["msg_per_s"]),
            ]
            for s in stores
        ),
    )
    lines += ["", "## Reads and footprint", ""]
    lines += _table(
        [
            "store",
            "tail 50 p50 / p99",
            "full load p50 / p99",
            "open + tail 50 p50 / p99",
            "bytes/msg",
            "growth",
            "peak RSS",
        ],
        (
            [
                s["label"],
                _pair(s["workload"]["tail_50"]),
                _pair(s["workload"]["full_load"])
                + f" ({s['workload']['full_load']['messages']:,})",
                _pair(s["workload"]["open_and_tail_50"]),
                f"{s['workload']['disk']['bytes_per_message']:,.0f}",
                _growth(s["workload"]["disk"]["growth"]),
                f"{s['workload']['rss_mb']['peak']:.0f} MB",
            ]
            for s in stores
        ),
    )
    lines += [
        "",
        "Growth: bytes per message added in the second half of the appends over the first half "
        "(1 = linear). Peak RSS is the child process's `ru_maxrss`, imports included. "
        "The baseline and LangGraph write nothing to create a session, hence their sessions/s.",
        "",
        "## Two writer processes on one database",
        "",
    ]
    lines += _table(
        [
            "store",
            "distinct sessions: errors / lost / dup / phantom",
            "msg/s",
            "one shared session: errors / lost / dup / phantom",
            "msg/s",
        ],
        ([s["label"], *_writer_cells(s, "distinct"), *_writer_cells(s, "shared")] for s in stores),
    )
    lines += [
        "",
        "Lost: the call returned but the message is not stored; phantom: stored although its "
        "call raised (part of a turn).",
        "",
    ]
    lines += _ratio_sections(results)
    lines += _problems(results)
    gateway = results.get("gateway", {})
    lines += ["## Gateway pipeline", ""]
    if gateway.get("status") == "ok":
        for where in ("in_process", "http"):
            part = gateway.get(where)
            if part:
                lines.append(
                    f"- {where.replace('_', ' ')}: {_n(part['turns_per_s'])} turns/s, overhead "
                    f"{_pair(part['overhead_ms'])}"
                )
        feed = gateway.get("feed")
        if feed:
            isolated = feed["isolated"]
            lines.append(
                f"- live feed: {_n(feed['turns_per_s_0'])} turns/s with no subscriber, "
                f"{_n(feed['turns_per_s_subscribed'])} with {feed['subscribers']} "
                f"(medians of {feed['rounds']} rounds, each phase first in turn; "
                f"{feed['slowdown']:+.1%} by the rounds' paired ratios; "
                f"{feed['events_per_turn']} events a turn, {feed['resets']} resets); the feed "
                "alone costs "
                f"{isolated['publish_us_per_turn']} µs a turn to publish, "
                f"{isolated['publish_and_deliver_us_per_turn']} µs with the subscribers "
                "(unbatched)"
            )
        lines += _postgres_lines(gateway)
    else:
        lines.append(f"Not measured: {gateway.get('reason', 'no gateway section')}.")
    lines.append("")
    lines += instances_lines(results.get("instances", {}))
    lines += agent_kinds_lines(results.get("agent_kinds", {}))
    lines += job_burst_lines(results.get("job_burst", {}))
    lines += remote_db_lines(results.get("remote_db", {}))
    lines += pg_store_lines(results.get("pg_store", {}))
    lines += _telegram_lines(results.get("telegram", {}))
    lines += _signal_lines(results.get("signal", {}))
    tree = results.get("tree", {})
    if tree.get("status") == "ok":
        sizes = tree["sizes"]
        lines += [
            "## Conversation trees",
            "",
            f"- branch listing, {sizes['tips']} tips: {_ms(tree['branches']['median_ms'])}",
            f"- model context, {sizes['entries']} entries: {_ms(tree['context']['median_ms'])}",
            f"- fork of a {sizes['fork_prefix']}-message prefix: {_ms(tree['fork']['median_ms'])}",
            "",
        ]
    lines += _platform_lines(results.get("platforms", {}))
    lines += _whatsapp_lines(results.get("whatsapp", {}))
    return "\n".join(lines)


def _telegram_lines(telegram: dict[str, Any]) -> list[str]:
    lines = ["## Telegram adapter", ""]
    if telegram.get("status") != "ok":
        return [*lines, f"Not measured: {telegram.get('reason', 'no telegram section')}.", ""]
    burst, one = telegram["throughput"], telegram["latency"]
    return [
        *lines,
        f"- {telegram['updates']} updates through the Bot API stub, python-telegram-bot and the "
        f"echo agent: {_n(burst['updates_per_s'])} updates/s "
        f"(gateway CPU {burst['gateway_cpu_ms_per_update']:.2f} ms per update, start-up "
        f"included; load average {burst['load_average']})",
        f"- one at a time: {_pair(one['latency_ms'])} per message (p50 / p99), of which the "
        f"bare SDK round trip is {_pair(one['sdk_roundtrip_ms'])}: the adapter and gateway add "
        f"{_pair(one['overhead_ms'])}",
        "",
    ]


def _whatsapp_lines(whatsapp: dict[str, Any]) -> list[str]:
    """The WhatsApp adapter end to end beside the stub's own floor, measured in the same run."""
    lines = ["## WhatsApp adapter", ""]
    if not whatsapp:
        return []
    if whatsapp.get("status") != "ok":
        return [*lines, f"Not measured: {whatsapp.get('reason', 'no whatsapp section')}.", ""]
    rate, one = whatsapp["throughput"], whatsapp["latency"]
    return [
        *lines,
        f"- {whatsapp['messages']} signed webhooks through `/hooks/whatsapp`, the adapter, the "
        f"echo agent and pywa to the Graph API stub: {_n(rate['gateway']['messages_per_s'])} "
        f"messages/s; the stub's own floor (a bare receiver sending the same reply, no gateway) "
        f"{_n(rate['floor']['messages_per_s'])} messages/s in the same run",
        f"- one at a time: {_pair(one['gateway_ms'])} per message (p50 / p99), the floor "
        f"{_pair(one['floor_ms'])}: the adapter and gateway add {_pair(one['overhead_ms'])}",
        "",
    ]


def _signal_lines(signal: dict[str, Any]) -> list[str]:
    lines = ["## Signal adapter", ""]
    if signal.get("status") != "ok":
        return [*lines, f"Not measured: {signal.get('reason', 'no signal section')}.", ""]
    gateway, floor = signal["gateway"], signal["floor"]
    rate = _n(gateway["throughput"]["updates_per_s"])
    return [
        *lines,
        f"- {signal['updates']} messages through the signal-cli stub's event stream, the "
        f"adapter, the echo agent and JSON-RPC `send`: {rate} updates/s (each also "
        "acknowledged with a reaction); the stub's floor, each event answered straight from "
        "the stream with no gateway: "
        f"{_n(floor['throughput']['updates_per_s'])} updates/s",
        f"- one at a time: {_pair(gateway['latency']['latency_ms'])} per message (p50 / p99); "
        f"the floor {_pair(floor['latency']['latency_ms'])}",
        "",
    ]


def _platform_lines(section: dict[str, Any]) -> list[str]:
    """Per-message overhead of each platform adapter over its loopback stub (p50 / p99)."""
    if section.get("status") != "ok":
        return []
    lines = [
        "## Platform adapters",
        "",
        f"One message at a time, {section['messages']} each, through the platform's SDK and "
        "its loopback stub; overhead = latency minus one bare SDK round trip.",
        "",
    ]
    for name in ("slack", "discord", "matrix"):
        part = section.get(name, {})
        if part.get("status") == "ok":
            lines.append(
                f"- {name}: latency {_pair(part['latency_ms'])}, SDK round trip "
                f"{_pair(part['sdk_roundtrip_ms'])}, overhead {_pair(part['overhead_ms'])}"
            )
            if "updates_per_s" in part:
                lines.append(
                    f"  - burst of {section['messages']}: {_n(part['updates_per_s'])} updates/s "
                    f"end to end; the stub alone {_n(part['stub_floor_updates_per_s'])} updates/s"
                )
        else:
            lines.append(f"- {name}: not measured ({part.get('reason', 'no result')})")
    return [*lines, ""]


def _fresh_cells(store: dict[str, Any]) -> list[str]:
    fresh = store["workload"].get("append_new")
    if not fresh:
        return [DASH, DASH]
    return [f"**{_n(fresh['msg_per_s'])}**", _pair(fresh["first_turn_latency"])]


def _durability(store: dict[str, Any]) -> str:
    described = store["workload"].get("describe", {})
    journal = described.get("journal_mode", "?")
    return f"{described.get('synchronous', store['durability'])}, {journal}"


def _pair(p: dict[str, Any]) -> str:
    return f"{_ms(p['p50_ms'])} / {_ms(p['p99_ms'])}"


def _growth(value: float | None) -> str:
    return DASH if value is None else f"{value:.2f}"


def _writer_cells(store: dict[str, Any], mode: str) -> list[str]:
    w = store["writers"][mode]
    cells = f"{w['errors']} / {w['lost']} / {w['duplicated']} / {w['phantom']}"
    if w["error_kinds"]:
        cells += " (" + ", ".join(f"{k} {X}{v}" for k, v in w["error_kinds"].items()) + ")"
    return [cells, _n(w["msg_per_s"])]


def _ratio_sections(results: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for mine_id in (SG_DEFAULT, SG_FULL):
        mine = _store(results, mine_id)
        if mine is None:
            continue
        others = [s for s in _ok_stores(results) if s["family"] != "sessiongate"]
        if not others:
            continue
        w = mine["workload"]
        lines += [
            f"## {mine['label']} against each store",
            "",
            "Times faster (>1 is sessiongate ahead); bytes and RSS as sessiongate ÷ other "
            "(<1 is sessiongate smaller). † = different hot-session size.",
            "",
        ]
        rows = []
        for other in others:
            o = other["workload"]
            mark = "†" if o["full_load"]["messages"] != w["full_load"]["messages"] else ""
            rows.append(
                [
                    other["label"],
                    other["durability"],
                    _x(w["append"]["msg_per_s"], o["append"]["msg_per_s"]),
                    _x(_fresh(mine), _fresh(other)) if _fresh(other) else DASH,
                    _x(o["tail_50"]["p50_ms"], w["tail_50"]["p50_ms"]),
                    _x(o["full_load"]["p50_ms"], w["full_load"]["p50_ms"]) + mark,
                    _x(o["open_and_tail_50"]["p50_ms"], w["open_and_tail_50"]["p50_ms"]),
                    _x(w["disk"]["bytes_per_message"], o["disk"]["bytes_per_message"]),
                    _x(w["rss_mb"]["peak"], o["rss_mb"]["peak"]),
                ]
            )
        lines += _table(
            [
                "vs",
                "its durability",
                "appends",
                "appends + creation",
                "tail 50",
                "full load",
                "open + tail",
                "bytes/msg",
                "peak RSS",
            ],
            rows,
        )
        lines.append("")
    return lines


def _x(numerator: float, denominator: float) -> str:
    if denominator <= 0:
        return DASH
    ratio = numerator / denominator
    return f"{ratio:,.0f}{X}" if ratio >= 100 else f"{ratio:.2f}{X}"


def _problems(results: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for store in results.get("stores", {}).values():
        if store.get("status") == "error":
            first = str(store.get("error", "")).strip().splitlines()[-1:] or ["unknown error"]
            lines.append(f"- {store['label']}: **failed** — {first[0]}")
        problems = store.get("workload", {}).get("problems", [])
        lines.extend(f"- {store['label']}: wrong read — {problem}" for problem in problems)
    lines.extend(f"- {s['label']}: skipped — {s['reason']}" for s in results.get("skipped", []))
    if results.get("chart", {}).get("reason"):
        lines.append(f"- chart not drawn — {results['chart']['reason']}")
    return ["## Skipped, failed and wrong", "", *lines, ""] if lines else []


def write_markdown(results: dict[str, Any], path: Path) -> None:
    """Write the report, keeping the notes of the file it replaces."""
    notes = f"{NOTES_START}\n{NOTES_END}"
    if path.exists():
        old = path.read_text()
        start, end = old.find(NOTES_START), old.find(NOTES_END)
        if start != -1 and end > start:
            notes = old[start : end + len(NOTES_END)]
    body = render_markdown(results)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{body}\n## Notes\n\n{notes}\n")
