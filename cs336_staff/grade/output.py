"""The worker's printed output, read in a thread: a bounded copy per test and per run.

The worker's stdout is its stderr (``worker/main.py``), read here as one stream. A test's share is
what arrived since the last ``take``; ``take(through=mark)`` waits for a mark the worker writes after
a call's output, so nothing printed before it is missed (``Remote.printed``).
"""

from __future__ import annotations

import threading
from typing import Any

OUTPUT_PER_TEST = 8000  # characters of worker output shown per test (head and tail)
# characters of worker output kept between two takes (head and tail): a test reads them
PRINTED_CHARS = 1 << 20
CONSOLE_LIMIT = 64 << 10  # characters of worker output kept for the whole run (head and tail)


class OutputTap:
    """Reads the worker's stderr (its stdout too) in a thread; keeps a bounded copy per test and per run."""

    def __init__(self, stream: Any) -> None:
        # notified whenever output arrives (``take_through`` waits on it)
        self._lock = threading.Condition()
        self._test: list[str] = []
        self._test_size = 0
        self._test_dropped = 0
        self.head, self.tail, self.dropped = "", "", 0
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: Any) -> None:
        for raw in iter(lambda: stream.read1(4096), b""):
            text = raw.decode("utf-8", "replace")
            with self._lock:
                self._keep_console(text)
                if self._test_size < PRINTED_CHARS:
                    self._test.append(text)
                    self._test_size += len(text)
                else:
                    self._test_dropped += len(text)
                    self._test = self._test[-64:]  # keep a tail too
                    self._test.append(text)
                self._lock.notify_all()

    def _keep_console(self, text: str) -> None:
        half = CONSOLE_LIMIT // 2
        if len(self.head) < half:
            take = text[: half - len(self.head)]
            self.head += take
            text = text[len(take) :]
        if text:
            self.tail += text
            if len(self.tail) > half:
                self.dropped += len(self.tail) - half
                self.tail = self.tail[-half:]

    def take(
        self, through: str | None = None, timeout: float = 0.0, limit: int = OUTPUT_PER_TEST
    ) -> str:
        """What the worker printed since the last ``take``, cut to about ``limit`` characters.

        With ``through`` (a mark the worker wrote after everything a call printed), wait up to
        ``timeout`` seconds for the mark to arrive, so that nothing printed before it is missed;
        the mark itself is left out.
        """
        with self._lock:
            if through is not None:
                self._lock.wait_for(lambda: through in "".join(self._test[-3:]), timeout)
            text, dropped = "".join(self._test), self._test_dropped
            self._test, self._test_size, self._test_dropped = [], 0, 0
        if through is not None:
            text = text.replace(through, "")
        if dropped or len(text) > limit:
            half = limit // 2
            text = f"{text[:half]}\n[... {dropped + max(0, len(text) - limit)} characters cut ...]\n{text[-half:]}"
        return text

    def console(self) -> str:
        with self._lock:
            cut = f"\n[... {self.dropped} characters cut ...]\n" if self.dropped else ""
            return self.head + cut + self.tail

    def join(self, timeout: float = 2.0) -> None:
        self._thread.join(timeout)
