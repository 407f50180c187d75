"""The persistent XLA compilation cache of a training run or an evaluation (TrainConfig.compile_cache, and the same
field of every `memjax.evaluate` config).

Owns `resolve_compile_cache(setting, platform, env)`, which folder a setting means (pure),
`use_compile_cache(setting)`, which applies it to jax's config before the run's first compile and returns it, and
`check_compile_cache(owner, setting)`, the configs' validation.
"auto" (the default): jax's own JAX_COMPILATION_CACHE_DIR when set (already in effect: jax reads it at import);
else, on GPU backends, $MEMJAX_CACHE_DIR/xla, $XDG_CACHE_HOME/memjax/xla or ~/.cache/memjax/xla; on CPU none (the
tiny programs it runs compile in about the time a cache read takes). "none": off. Anything else: that folder.
jax keys each entry by the program, the jax and XLA versions, the backend and the flags, so one folder serves every
run and model: a resumed run (a new process) or the next run of a config reads its programs instead of compiling
them again (the 7B engine loop and train step take minutes to compile). jax's threshold stays: only programs that
took over jax_persistent_cache_min_compile_time_secs (1 s by default) to compile are written.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["resolve_compile_cache", "use_compile_cache", "check_compile_cache"]


def check_compile_cache(owner: str, setting) -> None:
    """One-line ValueError unless `setting` is "auto", "none" or a folder (a non-blank string)."""
    if not isinstance(setting, str) or not setting.strip():
        raise ValueError(f"{owner}.compile_cache must be 'auto', 'none' or a folder, got {setting!r}")


def resolve_compile_cache(setting: str, platform: str, env=os.environ) -> str | None:
    """The cache folder `setting` means on a `platform` ("gpu", "cpu", ...) backend, or None for no cache (or,
    under "auto" with JAX_COMPILATION_CACHE_DIR set, the folder jax already uses)."""
    if setting == "none":
        return None
    if setting != "auto":
        return str(Path(setting).expanduser())
    if env.get("JAX_COMPILATION_CACHE_DIR"):
        return env["JAX_COMPILATION_CACHE_DIR"]
    if platform not in ("gpu", "cuda", "rocm"):
        return None
    if env.get("MEMJAX_CACHE_DIR"):
        return str(Path(env["MEMJAX_CACHE_DIR"]).expanduser() / "xla")
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return str(base / "memjax" / "xla")


def _unwritable(folder: str) -> str | None:
    """Why `folder` cannot hold the cache (created if absent), or None."""
    import tempfile

    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder, prefix=".memjax-check-"):
            pass
    except OSError as e:
        return e.strerror or str(e)
    return None


def check_writable(setting: str) -> None:
    """`--check`: print where compiled programs will be cached, or that the folder cannot be written (the run then
    compiles without a persistent cache)."""
    import jax

    folder = resolve_compile_cache(setting, jax.default_backend())
    if folder is None:
        return
    p = Path(folder)
    while not p.exists():
        p = p.parent
    if not p.is_dir():
        why = f"{p} is a file"
    else:
        import tempfile

        try:  # nothing is created but a temporary file, removed at once
            with tempfile.TemporaryFile(dir=p, prefix=".memjax-check-"):
                pass
            why = None
        except OSError as e:
            why = e.strerror or str(e)
    if why:
        print(f"compilation cache: {folder} cannot be written ({why}); the run compiles without a persistent cache")


def use_compile_cache(setting: str, say=None) -> str | None:
    """Point jax's persistent compilation cache at `setting`'s folder (created here) -> that folder, or None.
    say(line): told the folder in use, unless it is jax's own JAX_COMPILATION_CACHE_DIR (the user set that)."""
    import jax

    folder = resolve_compile_cache(setting, jax.default_backend())
    if folder is None:
        if setting == "none":
            jax.config.update("jax_compilation_cache_dir", None)
        return None
    why = _unwritable(folder)
    if why:  # a cache that cannot be written is not a reason to stop: the run compiles without one, and says so
        if say is not None:
            say(f"compilation cache: {folder} cannot be written ({why}); running without a persistent cache")
        jax.config.update("jax_compilation_cache_dir", None)
        return None
    jax.config.update("jax_compilation_cache_dir", folder)
    if say is not None and folder != os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        say(f"compilation cache: {folder}")
    return folder
