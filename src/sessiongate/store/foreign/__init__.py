"""Importers from other systems' homes (`sessiongate import hermes|openclaw`).

Each reader (`hermes.py`, `openclaw.py`) turns a home into an `ImportPlan` (sessions as
trees, routing entries, and what cannot be imported with the reason) without writing
anything; `apply.py` writes a plan through the store, one transaction per session.
"""
