"""Both in-tree adapters satisfy the `PlatformAdapter` protocol the runner relies on."""

from __future__ import annotations

import pytest

from sessiongate.adapters.base import PlatformAdapter
from sessiongate.adapters.local import LocalAdapter
from sessiongate.adapters.loopback import LoopbackAdapter
from sessiongate.core.platform import Platform


@pytest.mark.parametrize(
    ("adapter", "platform"),
    [(LoopbackAdapter(), Platform.TELEGRAM), (LocalAdapter(), Platform.LOCAL)],
    ids=["loopback", "local"],
)
def test_adapters_implement_the_protocol(adapter, platform):
    assert isinstance(adapter, PlatformAdapter)
    assert adapter.platform == platform
    assert adapter.pii_safe is True
    assert adapter.chat_id_key("Room-1") == "Room-1"
