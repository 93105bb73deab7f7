"""measure: see docs/architecture.md."""
