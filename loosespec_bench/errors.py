"""User-facing errors: printed as one line by the CLI, never as a traceback."""


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the value and what to change."""


def one_line(err: BaseException) -> str:
    """A Hydra / OmegaConf error as one line: its text without the grammar link and the
    full_key / object_type detail lines."""
    lines = []
    for line in str(err).splitlines():
        line = line.strip()
        if not line or line.startswith(("See https://hydra.cc", "full_key:", "object_type", "reference_type", "Available options")):
            continue
        lines.append(line.rstrip("."))
    text = "; ".join(lines) or type(err).__name__
    if text[:1].isupper() and not text[1:2].isupper():  # "Could not ..." -> "could not ...", not "ABC"
        text = text[:1].lower() + text[1:]
    return text
