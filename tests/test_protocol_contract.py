"""The storage protocol is its own contract: every method says what it does, and both
backends' transactions offer every method of it."""

from __future__ import annotations

import inspect

import pytest

from sessiongate.store import protocol
from sessiongate.store.postgres.tx import PostgresTx
from sessiongate.store.sqlite.tx import SqliteTx


def _methods(cls: type) -> dict[str, object]:
    found: dict[str, object] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__.startswith("sessiongate.store.protocol"):
            found.update(
                (name, value)
                for name, value in vars(klass).items()
                if not name.startswith("_") and (callable(value) or isinstance(value, property))
            )
    return found


@pytest.mark.parametrize("name", ["Tx", "Backend", "LeaseTx", "LeaseBackend"])
def test_every_protocol_method_is_documented(name):
    undocumented = [
        method
        for method, value in _methods(getattr(protocol, name)).items()
        if not inspect.getdoc(value.fget if isinstance(value, property) else value)
    ]
    assert undocumented == []


def test_tx_is_composed_of_the_families():
    families = [getattr(protocol, n) for n in protocol.__all__ if n.endswith("Tx")]
    composed = {c for c in families if c not in (protocol.Tx, protocol.LeaseTx)}
    assert composed <= set(protocol.Tx.__mro__)
    # No method is left outside a family: `Tx` itself adds only the change feed's `note`.
    assert set(vars(protocol.Tx)) & set(_methods(protocol.Tx)) == {"note"}


@pytest.mark.parametrize(("tx", "contract"), [(SqliteTx, "Tx"), (PostgresTx, "LeaseTx")])
def test_both_backends_offer_every_method(tx, contract):
    missing = sorted(m for m in _methods(getattr(protocol, contract)) if not hasattr(tx, m))
    assert missing == []
