"""User-facing errors: printed as one line by the CLI, never as a traceback."""


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the value and what to change."""
