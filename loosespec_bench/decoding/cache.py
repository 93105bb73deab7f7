"""KV-cache rollback, in one place."""

from __future__ import annotations

from transformers import Cache


def crop_to(cache: Cache, length: int) -> None:
    """Keep the first `length` positions of every layer.

    A negative argument to `Cache.crop` means "remove that many" in transformers 4.x and 5.x
    alike (5.x refuses the old positive "final length" form), so this is the portable call.
    """
    remove = cache.get_seq_length() - length
    if remove < 0:
        raise ValueError(f"cannot crop a cache of {cache.get_seq_length()} positions to {length}")
    if remove:
        cache.crop(-remove)
