"""sessiongate."""
