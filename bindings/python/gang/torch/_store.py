"""torch.distributed's store, in the terms gang's rendezvous asks for.

gang.create(store=...) runs a gang's rendezvous through any object with
the six methods below; StoreAdapter gives them to a c10d
Store (TCPStore, FileStore, HashStore, a PrefixStore around one), so a gang
made for a process group meets its peers in the keys torch handed the
backend, with no port or server of its own.
"""

import datetime

__all__ = ["StoreAdapter"]


def _timed_out(exc: BaseException) -> bool:
    """Whether a store's exception says a wait ran out (DistStoreError in
    torch 2.x, RuntimeError with the word in older releases)."""
    text = str(exc).lower()
    return "timeout" in text or "timed out" in text


class StoreAdapter:
    """set/get/add/delete/check/wait over a torch.distributed Store."""

    __slots__ = ("_store",)

    def __init__(self, store):
        self._store = store

    def set(self, key: str, value: bytes) -> None:
        self._store.set(key, value)

    def get(self, key: str, timeout_ms: int):
        """key's value, or None when it is not set within timeout_ms."""
        if not self.wait([key], timeout_ms):
            return None
        return bytes(self._store.get(key))

    def add(self, key: str, delta: int) -> int:
        return int(self._store.add(key, delta))

    def delete(self, key: str) -> None:
        self._store.delete_key(key)

    def check(self, keys: list) -> bool:
        return bool(self._store.check(keys))

    def wait(self, keys: list, timeout_ms: int) -> bool:
        """True once every key is set; False when timeout_ms ran out."""
        try:
            self._store.wait(keys, datetime.timedelta(milliseconds=max(1, timeout_ms)))
        except Exception as exc:  # torch's own types differ by release
            if _timed_out(exc):
                return False
            raise
        return True
