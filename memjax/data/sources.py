"""grain data sources and pipelines over RULER-HotpotQA and the RULER synthetic tasks.

Owns: `HotpotQASource` and `RulerSource` (grain `RandomAccessDataSource`s: `__len__`, `__getitem__`, a stable
`__repr__` for DataLoader checkpoints) and the pipeline builders `make_pipeline` (a grain `MapDataset` read as an
`IterDataset` with bounded read-ahead threads) and `make_dataloader` (grain `DataLoader`, optional worker processes).

Invariants:
- Lazy and deterministic: record `i` is synthesised when accessed and depends only on the source's construction
  arguments and `i` (never on access order, workers or threads), so any pipeline position can be recomputed.
- Records are plain dicts (`RulerHotpotQASample.to_dict()` / `RulerSample.to_dict()`); batches are lists of records
  (text does not stack into arrays; tokenisation happens in the agent workflow).
- Iterator state is checkpointable: `it.get_state()` / `it.set_state(state)` (a dict for dataset iterators, bytes
  for DataLoader iterators) resume at the same element; shuffling is seeded and reshuffled per epoch
  deterministically.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .hotpotqa import HotpotQACorpus, RulerHotpotQAConfig, synthesize
from .ruler import RulerGenerator

if TYPE_CHECKING:
    import grain

Record = dict[str, Any]


def _grain():
    """grain, imported where a pipeline is built: the engine, trainer and benchmarks import without it (the GPU
    image has no grain)."""
    try:
        import grain
    except ImportError as e:
        raise ImportError("memjax.data pipelines need grain: pip install 'grain>=0.2.10' (a memjax dependency)") from e
    return grain


class HotpotQASource:
    """RULER-HotpotQA records: record `i` is question `indices[i]` (all questions when `indices` is None, e.g. the
    `kept` indices of `filter_no_context`) synthesised with `config`."""

    def __init__(self, corpus: HotpotQACorpus, config: RulerHotpotQAConfig,
                 indices: Sequence[int] | None = None) -> None:
        n = len(corpus.questions)
        self._indices = tuple(range(n)) if indices is None else tuple(int(i) for i in indices)
        bad = [i for i in self._indices if not 0 <= i < n]
        if bad:
            raise IndexError(f"{corpus.path}: question index {bad[0]} out of range [0, {n})")
        self.corpus, self.config = corpus, config

    def __len__(self) -> int:
        return len(self._indices)

    def __getitem__(self, i: int) -> Record:
        return synthesize(self.corpus, self._indices[_check(i, len(self))], self.config).to_dict()

    def __repr__(self) -> str:
        return (f"HotpotQASource(path={self.corpus.path!r}, num_docs={self.config.num_docs}, seed={self.config.seed}, "
                f"records={len(self)})")


class RulerSource:
    """RULER records: record `i` is sample `i // len(tasks)` of task `tasks[i % len(tasks)]` (tasks interleaved),
    `num_samples` per task."""

    def __init__(self, generator: RulerGenerator, tasks: Sequence[str], num_samples: int) -> None:
        if not tasks:
            raise ValueError("RulerSource: tasks must not be empty")
        if num_samples < 1:
            raise ValueError(f"RulerSource: num_samples must be >= 1, got {num_samples}")
        for t in tasks:
            limit = generator.num_questions(t)  # raises on an unknown task or a missing QA corpus
            if limit is not None and num_samples > limit:
                raise ValueError(f"RulerSource: task {t} has {limit} questions < num_samples={num_samples}")
        self.generator, self.tasks, self.num_samples = generator, tuple(tasks), num_samples

    def __len__(self) -> int:
        return len(self.tasks) * self.num_samples

    def __getitem__(self, i: int) -> Record:
        i = _check(i, len(self))
        return self.generator.sample(self.tasks[i % len(self.tasks)], i // len(self.tasks)).to_dict()

    def __repr__(self) -> str:
        c = self.generator.config
        return (f"RulerSource(tasks={list(self.tasks)}, num_samples={self.num_samples}, "
                f"target_tokens={c.target_tokens}, seed={c.seed})")


def _check(i: int, n: int) -> int:
    i = int(i)
    if not 0 <= i < n:
        raise IndexError(f"record index {i} out of range [0, {n})")
    return i


class _Block:
    """Records [lo, hi) of every whole batch of `batch_size` records of `ds` (a grain MapDataset), in order."""

    def __init__(self, ds, batch_size: int, lo: int, hi: int) -> None:
        self.ds, self.batch_size, self.lo, self.n = ds, batch_size, lo, hi - lo
        self.length = (len(ds) // batch_size) * self.n

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, j: int) -> Record:
        return self.ds[(j // self.n) * self.batch_size + self.lo + j % self.n]


def make_pipeline(source: HotpotQASource | RulerSource, *, batch_size: int, seed: int, shuffle: bool = True,
                  num_epochs: int | None = 1, drop_remainder: bool = False, read_threads: int = 0,
                  prefetch: int | None = None, shard: tuple[int, int] | None = None) -> grain.IterDataset:
    """source -> (seeded shuffle, reshuffled each epoch) -> repeat(num_epochs; None = forever) -> batches (lists).

    `shard=(lo, hi)`: each batch is the block [lo, hi) of the batch the unsharded pipeline gives, and only
    those records are read (one process's share of a generation batch; needs drop_remainder).

    Records are synthesised on `read_threads` threads (0: in the consuming thread) with at most `prefetch` batches
    (default `2 * read_threads`) read ahead. grain's own default (16 threads, 500 elements ahead) would synthesise
    hundreds of long contexts nobody asked for yet, so it is never used here. Order and iterator state do not
    depend on the threading."""
    if batch_size < 1:
        raise ValueError(f"make_pipeline: batch_size must be >= 1, got {batch_size}")
    if read_threads < 0 or (prefetch is not None and prefetch < 0):
        raise ValueError(f"make_pipeline: read_threads and prefetch must be >= 0, got {read_threads}, {prefetch}")
    if shard is not None and not (drop_remainder and 0 <= shard[0] < shard[1] <= batch_size):
        raise ValueError(f"make_pipeline: shard={shard} needs drop_remainder=True and 0 <= lo < hi <= batch_size "
                         f"({batch_size})")
    grain = _grain()
    ds = grain.MapDataset.source(source)
    if shuffle:
        ds = ds.shuffle(seed=seed)
    if num_epochs != 1:
        ds = ds.repeat(num_epochs)
    if shard is not None:
        ds = grain.MapDataset.source(_Block(ds, batch_size, *shard))
        ds = ds.batch(shard[1] - shard[0], drop_remainder=True, batch_fn=list)
    else:
        ds = ds.batch(batch_size, drop_remainder=drop_remainder, batch_fn=list)
    ahead = 2 * read_threads if prefetch is None else prefetch
    return ds.to_iter_dataset(grain.ReadOptions(num_threads=read_threads, prefetch_buffer_size=ahead))


class PipelineStream:
    """A training DataStream over `make(shard) -> grain IterDataset` (make_pipeline with its arguments bound):
    `next()` a batch, `get_state()` / `set_state()` the iterator's, `shard(lo, hi)` the same stream reading
    only the block [lo, hi) of every batch (memjax.systems.shard_stream)."""

    def __init__(self, make, shard: tuple[int, int] | None = None) -> None:
        self.make, self._shard = make, shard
        self.it = iter(make(shard))

    def __iter__(self):
        return self

    def __next__(self) -> list[Record]:
        return next(self.it)

    def shard(self, lo: int, hi: int) -> "PipelineStream":
        out = PipelineStream(self.make, (lo, hi))
        out.set_state(self.get_state())
        return out

    def get_state(self):
        return self.it.get_state()

    def set_state(self, state) -> None:
        self.it.set_state(state)


def make_dataloader(source: HotpotQASource | RulerSource, *, batch_size: int, seed: int, shuffle: bool = True,
                    num_epochs: int | None = 1, drop_remainder: bool = False,
                    worker_count: int = 0) -> grain.DataLoader:
    """The same stream through grain's `DataLoader` (index sampler + batch op; `worker_count` processes).

    grain's worker processes read absl flags; when the caller has not parsed them (no `absl.app.run`), they are
    marked parsed here with their defaults so `worker_count > 0` works from plain scripts. Workers re-import the
    caller's main module (spawn), so scripts need an `if __name__ == "__main__":` guard."""
    if worker_count > 0:
        from absl import flags

        if not flags.FLAGS.is_parsed():
            flags.FLAGS.mark_as_parsed()
    grain = _grain()
    sampler = grain.samplers.IndexSampler(num_records=len(source), shuffle=shuffle, seed=seed,
                                          num_epochs=num_epochs)
    return grain.DataLoader(data_source=source, sampler=sampler, worker_count=worker_count,
                            operations=[grain.transforms.Batch(batch_size, drop_remainder=drop_remainder,
                                                               batch_fn=list)])
