"""`python -m memjax.run_agent`: run a memory agent on your own input -- a trained run's hf/, a base model directory,
or `tiny` (the tiny system's shipped policy, on any CPU).

  --system memagent   --docs FILE_OR_DIR ... -q QUESTION ...   read the documents chunk by chunk, streaming the memory
                                                               after each chunk, then answer from the memory
  --system sumer | memory_r1 | memory_r2  --conversation FILE [-q QUESTION ...]
                                                               build the memory over a conversation (LoCoMo's layout,
                                                               or a JSON list of sessions of {speaker, text, date})
                                                               and answer; a LoCoMo file's own questions when no -q
Writes to --out (default out/agent): record.json (every turn, as the systems' workflows trace it) and agent.html.
Each system runs its own workflow through the engine (MemAgent's, or the LongMemEval adapters each paper registers);
no prompt is written here. Invariants: input and model directory are checked before jax loads (one line, exit 2);
--out is a new or empty directory or one this command wrote (it holds .memjax-agent), never anything else.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from ..core.config import ConfigError
from .agent_input import InputError, as_questions, read_conversation, read_documents

SYSTEMS = ("memagent", "sumer", "memory_r1", "memory_r2")
MARKER = ".memjax-agent"
TINY = "tiny"


def _paper(system_name: str) -> str:
    """The paper of a registered system name (`tiny` is MemAgent's tiny task)."""
    return next((p for p in ("memory_r1", "memory_r2", "sumer") if p in system_name), "memagent")


def _model(args) -> tuple[bool, Any]:
    """(tiny?, tokenizer or None for the shipped tiny policy), checked before any weights load."""
    if args.model == TINY:
        return True, None
    from .model_dir import load_tokenizer

    root = Path(args.model)
    if not (root / "config.json").is_file():
        raise InputError(f"{root}: not a model directory (no config.json)")
    tok = load_tokenizer(root)
    tiny = hasattr(tok, "words")
    meta = root / "memjax.json"
    if meta.is_file():
        trained = json.loads(meta.read_text()).get("system") or ""
        if trained and _paper(trained) != args.system:
            raise InputError(f"{root}: a policy of system {trained!r}, not of {args.system}")
    return tiny, tok


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m memjax.run_agent", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--system", required=True, choices=SYSTEMS)
    ap.add_argument("--model", required=True, help="a model directory (a run's hf/) or 'tiny' (the shipped policy)")
    ap.add_argument("--answer-model", default="", help="memory_r1 with --model tiny or a tiny run: its answer agent's "
                                                       "directory (default: the shipped one)")
    ap.add_argument("--docs", nargs="+", default=[], help="MemAgent: text files and/or directories")
    ap.add_argument("--conversation", default="", help="SUMER / Memory-R1 / Memory-R2: the conversation's JSON file")
    ap.add_argument("--sample-id", default="", help="a LoCoMo file's conversation (default: the first)")
    ap.add_argument("-q", "--question", action="append", default=[], help="a question (repeat for several)")
    ap.add_argument("--out", default="out/agent", help="record.json and agent.html go here")
    ap.add_argument("--max-doc-chars", type=int, default=4_000_000, help="MemAgent: refuse longer documents")
    ap.add_argument("--chunk-tokens", type=int, default=5000, help="MemAgent (Qwen models): tokens per chunk")
    ap.add_argument("--memory-tokens", type=int, default=1024, help="MemAgent (Qwen models): memory budget")
    ap.add_argument("--max-questions", type=int, default=5, help="a LoCoMo file's questions asked when no -q")
    ap.add_argument("--screenshot", metavar="PNG", default="", help="also save a headless-Chromium screenshot of "
                                                                    "agent.html (memjax.report.browser)")
    ap.add_argument("--size", default="1280x1600", help="screenshot window WIDTHxHEIGHT (default 1280x1600)")
    return ap


def _screenshot_target(png: str, size: str) -> tuple[Path, int, int]:
    """--screenshot's file and window, checked before the run: WIDTHxHEIGHT, a folder it can write, a browser."""
    from ..report.browser import find_chromium

    try:
        w, h = (int(x) for x in size.lower().split("x"))
    except ValueError:
        raise InputError(f"--size {size!r}: not WIDTHxHEIGHT (e.g. 1280x1600)") from None
    if w <= 0 or h <= 0:
        raise InputError(f"--size {size!r}: not WIDTHxHEIGHT (e.g. 1280x1600)")
    path = Path(png).absolute()
    folder = path.parent
    while not folder.exists() and folder != folder.parent:  # the browser helper creates the missing folders
        folder = folder.parent
    if path.is_dir() or not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"--screenshot {png}: {folder} is not a writable folder")
    if find_chromium() is None:
        raise InputError("--screenshot: no headless browser: install Debian's `chromium` (or set MEMJAX_CHROMIUM)")
    return path, w, h


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    con = Console(highlight=False)
    try:
        blank = [i + 1 for i, q in enumerate(args.question) if not q.strip()]
        if blank:
            raise InputError(f"-q: question {blank[0]} of {len(args.question)} is empty; give the question's text "
                             "(-q \"where is kim ?\")")
        if args.system == "memagent":
            if not args.docs or not args.question:
                raise InputError("memagent needs --docs FILE_OR_DIR ... and at least one -q QUESTION")
            inputs: Any = read_documents(args.docs, args.max_doc_chars)
        else:
            if not args.conversation:
                raise InputError(f"{args.system} needs --conversation FILE")
            inputs = read_conversation(args.conversation, args.sample_id)
            asked = [(q, "") for q in args.question] or list(inputs.questions[: args.max_questions])
            if not asked:
                raise InputError(f"{args.conversation}: no question (give -q QUESTION)")
        shot = _screenshot_target(args.screenshot, args.size) if args.screenshot else None
        tiny, tok = _model(args)
        from ..core.outdir import claim_marked_dir

        out = claim_marked_dir(args.out, MARKER)
    except (InputError, ConfigError, ValueError, FileNotFoundError) as e:
        print(f"memjax.run_agent: error: {e}", file=sys.stderr)
        return 2
    from .agent_run import run_conversation, run_documents, write_outputs

    try:
        blank = [i + 1 for i, q in enumerate(args.question) if not q.strip()]
        if blank:
            raise InputError(f"-q: question {blank[0]} of {len(args.question)} is empty; give the question's text "
                             "(-q \"where is kim ?\")")
        if args.system == "memagent":
            record = run_documents(args, inputs, tiny, tok, con)
        else:
            record = run_conversation(args, as_questions(inputs, asked), tiny, con)
    except (InputError, ValueError) as e:  # e.g. a word the tiny vocabulary lacks, a prompt over the window
        print(f"memjax.run_agent: error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    record["inputs"] = args.docs or [args.conversation]
    page = write_outputs(out, record)
    con.print(f"record: {out / 'record.json'}  trace page: {page}", soft_wrap=True)
    if shot:
        from ..report.browser import BrowserMissing, screenshot

        try:
            con.print(f"screenshot: {screenshot(page, shot[0], width=shot[1], height=shot[2])}", soft_wrap=True)
        except (BrowserMissing, RuntimeError, OSError) as e:
            print(f"memjax.run_agent: error: screenshot: {(str(e).splitlines() or [repr(e)])[0]}", file=sys.stderr)
            return 1
    return 0
