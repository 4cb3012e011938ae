"""Platform API stubs on loopback, one module per platform, for offline tests and the
benchmark: `from sessiongate.testing.stubs import telegram as tg; tg.BotApiStub()`."""
