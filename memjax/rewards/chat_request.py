"""One OpenAI-compatible chat-completions request with retries, shared by the LLM judges (LoCoMo's and
LongMemEval's): POST the body, read `choices[0].message.content`, retry connection, HTTP and malformed-reply errors
after `delay(attempt)` seconds. Returns (what `accept` made of the content, "") or (None, one error line); it never
raises for a failed request, so a caller can count the failure instead of scoring it.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any, Callable


def post_chat(url: str, body: dict, *, api_key: str | None, opener: Callable[..., Any], timeout: float, retries: int,
              delay: Callable[[int], float], accept: Callable[[Any], Any] = lambda content: content) -> tuple[Any, str]:
    """`accept(content)` may raise ValueError/TypeError to mark a reply as malformed (then retried like a failure)."""
    payload = json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    err = ""
    for attempt in range(retries + 1):
        try:
            req = urllib.request.Request(url, data=payload, headers=headers, method="POST")
            with opener(req, timeout=timeout) as resp:
                data = json.loads(resp.read().decode("utf-8"))
            return accept(data["choices"][0]["message"]["content"]), ""
        except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError, TypeError) as e:
            err = f"judge request to {url} failed after {attempt + 1} tries: {type(e).__name__}: {e}"
            if attempt < retries:
                time.sleep(delay(attempt))
    return None, err
