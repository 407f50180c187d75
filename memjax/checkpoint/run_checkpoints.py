"""Train-state checkpoints of a run: save, verify, restore the newest good one, quarantine corrupt ones.

Owns `RunCheckpoints`, a thin layer over orbax's CheckpointManager (each step written to a temporary directory and
committed by rename, so a step directory is all-or-nothing), `quiet_orbax_logs` and `placed_like(restored, like)`
(restored arrays placed as the live ones, so a restore does not recompile).
Invariants:
- A save orbax declines is an error, never ignored; every save is verified once finished (listed, both items
  present, its metadata restores with its step), so a failed asynchronous write surfaces as one CheckpointError.
- `restore_latest(fn)` tries steps newest first; one that fails is moved aside into `<dir>_corrupt/<step>[.N]`
  (never deleted) with a one-line warning and the previous step is used; retention never deletes a good step
  because of a corrupt one. A ConfigError from the restore function (another model's checkpoint) is not
  corruption: it propagates and nothing is moved.
- `on_commit(step)` hears of each step once verified; `keep=None` keeps every step and the owner deletes steps
  itself (memjax.checkpoint.stage_best). docs/reliability.md has the fault matrix.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from ..core.config import ConfigError
from .errors import CheckpointError


def placed_like(restored, like):
    """`restored` (a tree orbax read back, as committed arrays) placed as the live tree `like`: leaves whose
    live array is uncommitted (single device, no mesh) become uncommitted too, so every jitted program taking
    them sees the inputs it was compiled for and does not compile again (on a mesh both are committed)."""
    return jax.tree.map(lambda x, ref: x if getattr(ref, "committed", True) else jnp.asarray(np.asarray(x)),
                        restored, like)


def one_line(e: BaseException, limit: int = 300) -> str:
    """`Type: first line of the message`, cut to `limit` characters (orbax errors run to pages)."""
    text = str(e).strip().splitlines()
    msg = text[0] if text else ""
    return f"{type(e).__name__}: {msg[:limit]}{'...' if len(msg) > limit or len(text) > 1 else ''}"


class _OneLineOrbaxLogs(logging.Filter):
    """orbax logs every failed background write with its full asyncio traceback (hundreds of lines for one
    full disk); keep the first line of each such record, the error itself reaches the caller as one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "orbax" in record.pathname and record.levelno >= logging.WARNING:
            msg = record.getMessage().strip().splitlines()
            record.msg, record.args = (msg[0][:400] if msg else ""), None
            record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def quiet_orbax_logs() -> None:
    logger = logging.getLogger("absl")
    if not any(isinstance(f, _OneLineOrbaxLogs) for f in logger.filters):
        logger.addFilter(_OneLineOrbaxLogs())


class RunCheckpoints:
    ITEMS = ("state", "meta")

    def __init__(self, directory: str | Path, keep: int | None, warn: Callable[[str], None] = print,
                 info: Callable[[str], None] | None = None, on_commit: Callable[[int], None] | None = None):
        if keep is not None and keep < 1:
            raise ValueError(f"keep_checkpoints must be >= 1, got {keep}")
        self.dir = Path(directory).absolute()
        self.quarantine_dir = self.dir.with_name(self.dir.name + "_corrupt")
        self.warn = warn
        self.info = info or (lambda m: None)  # a line when a save starts and when it has committed
        self.on_commit = on_commit or (lambda step: None)  # called with each step once it is verified
        quiet_orbax_logs()
        if self.dir.exists() and not self.dir.is_dir():
            raise CheckpointError(f"{self.dir}: is a file, not a checkpoint directory; move it away")
        try:
            self.mgr = ocp.CheckpointManager(self.dir, options=ocp.CheckpointManagerOptions(
                max_to_keep=keep, create=True))
        except OSError as e:
            raise CheckpointError(f"{self.dir}: cannot open the checkpoint directory ({one_line(e)})") from None
        self._unverified: int | None = None

    def all_steps(self) -> list[int]:
        return sorted(self.mgr.all_steps())

    # -- restore ------------------------------------------------------------------------------------
    def restore_latest(self, restore: Callable[[ocp.CheckpointManager, int], None]) -> int | None:
        """Call restore(manager, step) for the newest step that restores; None when none does."""
        for step in sorted(self.mgr.all_steps(), reverse=True):
            try:
                restore(self.mgr, step)
                return step
            except ConfigError:  # the user's mistake (e.g. another model's checkpoints): not corruption
                raise
            except Exception as e:  # corrupt / partial / unreadable: move it aside, try the previous one
                self.quarantine(step, e)
        return None

    def quarantine(self, step: int, reason: BaseException | str) -> Path:
        self.mgr.wait_until_finished()
        src = self.dir / str(step)
        self.quarantine_dir.mkdir(parents=True, exist_ok=True)
        dst, n = self.quarantine_dir / str(step), 1
        while dst.exists():
            dst, n = self.quarantine_dir / f"{step}.{n}", n + 1
        try:
            if jax.process_index() == 0:  # several processes: one moves it, the others wait for the move
                shutil.move(str(src), str(dst))
        except OSError as e:
            raise CheckpointError(f"{src}: cannot be restored ({reason if isinstance(reason, str) else one_line(reason)}) "
                                  f"and cannot be moved aside ({one_line(e)}); move or delete it by hand") from None
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices(f"memjax quarantine {step}")
        self.mgr.reload()
        why = reason if isinstance(reason, str) else one_line(reason)
        self.warn(f"warning: checkpoint {step} in {self.dir} cannot be restored ({why}); moved to {dst}, "
                  "falling back to the previous one")
        return dst

    # -- save ---------------------------------------------------------------------------------------
    def save(self, step: int, args) -> None:
        """Start saving `step` (asynchronously) after the previous save has finished and been verified."""
        self.finish()
        try:
            self.info(f"checkpoint {step}: saving to {self.dir / str(step)}")
            ok = self.mgr.save(step, args=args)
        except Exception as e:
            raise CheckpointError(f"{self.dir}: cannot save step {step} ({one_line(e)})") from None
        if not ok:
            raise CheckpointError(f"{self.dir}: orbax declined to save step {step} (existing steps "
                                  f"{self.all_steps()}); refusing to continue without checkpoints")
        self._unverified = step

    def finish(self) -> None:
        """Wait for the save in flight and verify it."""
        try:
            self.mgr.wait_until_finished()
        except Exception as e:
            step, self._unverified = self._unverified, None
            raise CheckpointError(f"{self.dir}: writing checkpoint {step} failed ({one_line(e)})") from None
        if self._unverified is not None:
            step, self._unverified = self._unverified, None
            self.verify(step)
            self.info(f"checkpoint {step}: committed")
            self.on_commit(step)

    def verify(self, step: int) -> None:
        self.mgr.reload()
        where = self.dir / str(step)
        missing = [i for i in self.ITEMS if not (where / i).is_dir()]
        if step not in self.mgr.all_steps() or missing:
            raise CheckpointError(f"{where}: checkpoint {step} is not complete after saving "
                                  f"(missing {missing or 'commit'})")
        try:
            meta = self.mgr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]
        except Exception as e:
            raise CheckpointError(f"{where}: checkpoint {step} does not read back ({one_line(e)})") from None
        if int(meta.get("step", -1)) != step:
            raise CheckpointError(f"{where}: checkpoint {step} reads back as step {meta.get('step')}")

    def delete(self, step: int) -> None:
        """Remove a committed step (after the save in flight has finished and been verified)."""
        self.finish()
        try:
            self.mgr.delete(step)
        except Exception as e:
            raise CheckpointError(f"{self.dir}: cannot delete step {step} ({one_line(e)})") from None
        self.mgr.reload()

    def close(self) -> None:
        try:
            self.finish()
        finally:
            self.mgr.close()
