"""Output-directory safety for memjax's programs: nothing lost, nothing silent (docs/architecture.md, principle 6).

Owns `prepare_out_dir(path, field)` (create an output directory or fail naming the field), `OutDirLock` (an
exclusive, non-blocking `fcntl.flock` on `<out_dir>/.memjax.lock`: a second run fails at once naming the holder's
pid, and the kernel drops the lock when the process dies, so a stale lock file never blocks), `claim_marked_dir`
(a directory a program may empty only when it created it or it holds the program's marker), `claim_kind` (one
output directory holds one kind of run: training, evaluation, locomo, longmemeval; recognised from its
`.memjax-kind` mark or from what such a run writes), `JsonlLog` (append-only JSON lines, fsynced per record, and
`truncate(max_step)` for a resumed run), `write_atomic`, `nonfinite` and `tb_writer` (a TensorBoard writer that
purges events past a resumed step).
Invariants: every error is one line naming the path; nothing here deletes a file it did not write.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

from .config import ConfigError

LOCK_NAME = ".memjax.lock"


def prepare_out_dir(path: str | os.PathLike, field: str = "out_dir") -> Path:
    p = Path(path).absolute()
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{field}={path}: exists and is not a directory")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"{field}={path}: cannot create the directory ({e.strerror or e})") from None
    if not os.access(p, os.W_OK | os.X_OK):
        raise ConfigError(f"{field}={path}: directory is not writable")
    return p


KIND_MARK = ".memjax-kind"
KINDS = ("training", "evaluation", "locomo", "longmemeval")


def dir_kind(path: str | os.PathLike) -> tuple[str, str] | None:
    """(kind, the evidence) of what an output directory holds, or None when it holds no run's files."""
    p = Path(path)
    if not p.is_dir():
        return None
    mark = p / KIND_MARK
    if mark.is_file():
        k = mark.read_text(encoding="utf-8").strip()
        return (k, KIND_MARK) if k in KINDS else None
    run = {}
    if (p / "run.json").is_file():
        try:
            run = json.loads((p / "run.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            run = {"?": None}
    if (p / "checkpoints").is_dir() or (p / "result.json").is_file() or (run and "run_key" not in run):
        return "training", next(f for f in ("checkpoints/", "result.json", "run.json")
                                if (p / f.rstrip("/")).exists())
    if run:
        return "evaluation", "run.json"
    preds = p / "predictions.jsonl"
    if preds.is_file():
        try:
            with preds.open(encoding="utf-8") as f:
                first = json.loads(f.readline() or "{}")
        except (OSError, ValueError):
            first = {}
        if "qid" in first:
            return "locomo", "predictions.jsonl"
        if "question_id" in first:
            return "longmemeval", "predictions.jsonl"
    if (p / "results.json").is_file():
        return "evaluation", "results.json"
    return None


def claim_kind(path: str | os.PathLike, kind: str, program: str, *, field: str = "out_dir", mark: bool = False) -> None:
    """Refuse (ConfigError, one line) a directory that holds another kind of run; with mark, write this kind's mark."""
    had = dir_kind(path)
    if had and had[0] != kind:
        a = lambda k: ("an " if k[0] in "aeiou" else "a ") + k  # noqa: E731
        raise ConfigError(f"{field}={path}: holds {a(had[0])} run ({had[1]}); {program} writes {a(kind)} run, into a "
                          f"directory of its own: give another {field}")
    if mark and Path(path).is_dir() and not (Path(path) / KIND_MARK).is_file():
        (Path(path) / KIND_MARK).write_text(kind + "\n", encoding="utf-8")


class OutDirLock:
    """`with OutDirLock(dir):` holds an exclusive lock on dir for the life of a run."""

    def __init__(self, out_dir: str | os.PathLike, field: str = "out_dir"):
        self.path = Path(out_dir) / LOCK_NAME
        self.field, self._fd = field, None

    def acquire(self) -> "OutDirLock":
        import fcntl

        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise ConfigError(f"{self.field}={self.path.parent}: cannot create its lock file ({e.strerror or e})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise ConfigError(f"{self.field}={self.path.parent}: in use by another run (pid {holder}); "
                              "use another out_dir or wait for it to finish") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            import fcntl

            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "OutDirLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def claim_marked_dir(path: str | os.PathLike, marker: str, *, field: str = "--out",
                     legacy: frozenset[str] = frozenset()) -> Path:
    """Empty `path` for a fresh run only if it is absent, empty, or holds `marker` (written by us before) or
    only entries named in `legacy` (the layout of older versions, which wrote no marker); otherwise a
    ConfigError. Returns the (re)created directory, with the marker written."""
    p = Path(path).absolute()
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{field} {path}: exists and is not a directory")
    if p.is_dir() and any(p.iterdir()):
        ours = (p / marker).is_file() or (legacy and {e.name for e in p.iterdir()} <= legacy)
        if not ours:
            raise ConfigError(f"{field} {path}: directory is not empty and was not created by this program "
                              f"(no {marker} in it); refusing to overwrite it: give a new or empty directory")
        shutil.rmtree(p)
    prepare_out_dir(p, field)
    (p / marker).write_text("written by memjax; this directory is emptied and rewritten on the next run\n")
    return p


class JsonlLog:
    """An append-only JSON-lines file; each record is flushed and fsynced before `write` returns. With
    enabled=False (a run's processes other than 0) write and truncate do nothing."""

    def __init__(self, path: str | os.PathLike, enabled: bool = True):
        self.path, self.enabled = Path(path), enabled

    def write(self, *records: dict) -> None:
        if not records or not self.enabled:
            return
        with self.path.open("a", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def truncate(self, max_step: int, key: str = "step") -> int:
        """Drop records with record[key] > max_step (and a torn last line); returns how many were dropped."""
        if not self.enabled or not self.path.is_file():
            return 0
        keep, dropped = [], 0
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:  # torn by a kill mid-write
                dropped += 1
                continue
            if isinstance(rec, dict) and isinstance(rec.get(key), int) and rec[key] > max_step:
                dropped += 1
                continue
            keep.append(line)
        if dropped:
            write_atomic(self.path, "".join(x + "\n" for x in keep))
        return dropped

    def fill(self, records: list[dict], key: str = "step") -> int:
        """Append the records whose record[key] no line of the file has (in order); returns how many."""
        if not self.enabled or not records:
            return 0
        have = set()
        if self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    have.add(json.loads(line).get(key))
                except (json.JSONDecodeError, AttributeError):
                    continue
        missing = [r for r in records if r.get(key) not in have]
        self.write(*missing)
        return len(missing)


def write_atomic(path: str | os.PathLike, text: str) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with tmp.open("w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def nonfinite(metrics: dict, keys=None) -> list[str]:
    keys = metrics.keys() if keys is None else keys
    return [k for k in keys if isinstance(metrics.get(k), float) and not math.isfinite(metrics[k])]


def tb_writer(logdir: Path, *, resumed_step: int = 0):
    """A tensorboardX SummaryWriter for `logdir`. When resuming from step k > 0 it is opened with
    purge_step=k + 1: TensorBoard then discards the events an interrupted run wrote past the checkpoint
    it resumed from, so no step is shown twice (the event files themselves are kept)."""
    from tensorboardX import SummaryWriter

    return SummaryWriter(str(logdir), purge_step=resumed_step + 1 if resumed_step > 0 else None)


def out_dir_writable(path: str, field: str = "out_dir") -> None:
    """The out dir can be created and written (checked on the nearest existing ancestor; nothing is created)."""
    p = Path(path).absolute()
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{field}={path}: exists and is not a directory")
    q = p
    while not q.exists():
        q = q.parent
    if not q.is_dir():
        raise ConfigError(f"{field}={path}: {q} is a file, so the directory cannot be created")
    import tempfile

    try:  # os.access says yes to root on a read-only or virtual file system: a file made and removed at once
        with tempfile.TemporaryFile(dir=q, prefix=".memjax-check-"):
            pass
    except OSError as e:
        raise ConfigError(f"{field}={path}: cannot write in {q} ({e.strerror or e})") from None
