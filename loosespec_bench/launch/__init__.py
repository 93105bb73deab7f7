"""launch: see docs/architecture.md."""
