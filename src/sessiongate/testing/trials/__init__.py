"""`sessiongate try <platform>`: one module per platform with a `TARGET = TryTarget(...)`
(`sessiongate.testing.trial`), found by its file name."""
