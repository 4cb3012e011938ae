"""Draw docs/performance.png from a results JSON (runs in the contenders' venv: matplotlib).

python plot.py results.json performance.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

PANELS = (
    ("Appends (msg/s, higher is better)", lambda w: w["append"]["msg_per_s"]),
    ("Tail read of 50 (median ms, lower is better)", lambda w: w["tail_50"]["p50_ms"]),
    ("Full load of the hot session (median ms)", lambda w: w["full_load"]["p50_ms"]),
    ("Bytes per message on disk", lambda w: w["disk"]["bytes_per_message"]),
)
SESSIONGATE = "#1f6feb"
OTHER = "#8b949e"
BASELINE = "#57ab5a"


def _color(store: dict[str, Any]) -> str:
    return {"sessiongate": SESSIONGATE, "sqlite": BASELINE}.get(store["family"], OTHER)


def _label(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}" if value >= 1 else f"{value:.3f}"


def main(source: Path, target: Path) -> None:
    results = json.loads(source.read_text())
    stores = [s for s in results["stores"].values() if s["status"] == "ok"]
    stores.reverse()  # barh draws bottom-up; keep the run order top-down
    labels = [s["label"] for s in stores]
    fig, axes = plt.subplots(2, 2, figsize=(13, 2.2 + 0.45 * len(stores) * 2))
    for ax, (title, metric) in zip(axes.flat, PANELS, strict=True):
        values = [metric(s["workload"]) for s in stores]
        bars = ax.barh(labels, values, color=[_color(s) for s in stores])
        ax.set_xscale("log")
        ax.set_title(title, fontsize=10)
        ax.tick_params(axis="y", labelsize=8)
        texts = [_label(v) for v in values]
        if "Full load" in title:
            # LangGraph's hot thread is capped: say so beside its bar.
            sizes = [s["workload"]["full_load"]["messages"] for s in stores]
            texts = [
                t if n == max(sizes) else f"{t} ({n:,} msgs)"
                for t, n in zip(texts, sizes, strict=True)
            ]
        ax.bar_label(bars, labels=texts, fontsize=7, padding=2)
        ax.margins(x=0.25)
    machine = results["machine"]
    note = " (quick run: not a verdict)" if results.get("quick") else ""
    fig.suptitle(
        f"sessiongate bench{note}: {machine['cpu']}, {machine['cores']} cores, "
        f"Python {machine['python']}, SQLite {machine['sqlite']}  (log scales)",
        fontsize=10,
    )
    fig.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=110)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
