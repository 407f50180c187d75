"""grain sources and pipelines: lazy deterministic records, shuffled batching, checkpoint / resume of iterators."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memjax.core.tokenizer import Tokenizer
from memjax.data import (
    TASKS,
    HotpotQASource,
    PipelineStream,
    RulerConfig,
    RulerGenerator,
    RulerHotpotQAConfig,
    RulerSource,
    load_hotpotqa,
    load_squad,
    make_dataloader,
    make_pipeline,
    synthesize,
    without_essay,
)

FIX = Path(__file__).parents[2] / "fixtures" / "data"


@pytest.fixture(scope="module")
def source() -> HotpotQASource:
    return HotpotQASource(load_hotpotqa(FIX / "hotpotqa_dev_excerpt.json"), RulerHotpotQAConfig(num_docs=20, seed=1))


def _ids(batches) -> list[tuple[str, ...]]:
    return [tuple(r["id"] for r in b) for b in batches]


def test_hotpotqa_source_is_lazy_and_deterministic(source: HotpotQASource) -> None:
    assert len(source) == 8
    assert source[3] == synthesize(source.corpus, 3, source.config).to_dict()
    assert source[3] == source[3] and "num_docs=20" in repr(source)
    with pytest.raises(IndexError):
        source[8]
    sub = HotpotQASource(source.corpus, source.config, indices=[6, 2])
    assert len(sub) == 2 and sub[0]["id"] == source[6]["id"]
    with pytest.raises(IndexError, match="out of range"):
        HotpotQASource(source.corpus, source.config, indices=[8])


def test_pipeline_batches_a_seeded_permutation_each_epoch(source: HotpotQASource) -> None:
    ds = make_pipeline(source, batch_size=3, seed=0, num_epochs=2)
    batches = list(ds)
    assert [len(b) for b in batches] == [3, 3, 3, 3, 3, 1]
    ids = [r["index"] for b in batches for r in b]
    first, second = ids[:8], ids[8:]
    assert sorted(first) == sorted(second) == list(range(8)) and first != second  # reshuffled per epoch
    assert _ids(make_pipeline(source, batch_size=3, seed=0, num_epochs=2)) == _ids(batches)
    assert _ids(make_pipeline(source, batch_size=3, seed=1, num_epochs=2)) != _ids(batches)
    plain = [r["index"] for b in make_pipeline(source, batch_size=4, seed=0, shuffle=False) for r in b]
    assert plain == list(range(8))
    assert [len(b) for b in make_pipeline(source, batch_size=3, seed=0, drop_remainder=True)] == [3, 3]


def test_pipeline_shards_read_only_their_block(source: HotpotQASource) -> None:
    read = []

    class Counting:  # the source, recording which records are synthesised
        def __len__(self):
            return len(source)

        def __getitem__(self, i):
            read.append(i)
            return source[i]

    whole = _ids(b for b, _ in zip(make_pipeline(source, batch_size=3, seed=2, num_epochs=None, drop_remainder=True),
                                   range(6)))
    blocks = [(0, 2), (2, 3)]
    parts = []
    for lo, hi in blocks:
        read.clear()
        ds = make_pipeline(Counting(), batch_size=3, seed=2, num_epochs=None, drop_remainder=True, shard=(lo, hi))
        parts.append(_ids(b for _, b in zip(range(6), ds)))
        assert len(read) == 6 * (hi - lo)  # only its own records were read
    assert [a + b for a, b in zip(*parts)] == whole  # the blocks together are the unsharded batches
    with pytest.raises(ValueError, match="drop_remainder"):
        make_pipeline(source, batch_size=3, seed=2, shard=(0, 2))
    stream = PipelineStream(lambda shard: make_pipeline(source, batch_size=3, seed=2, num_epochs=None,
                                                        drop_remainder=True, shard=shard))
    next(stream)
    one = stream.shard(2, 3)  # starts where the stream is
    assert _ids([next(one) for _ in range(2)]) == [b[2:] for b in whole[1:3]]
    again = PipelineStream(stream.make).shard(2, 3)
    again.set_state(json.loads(json.dumps(one.get_state())))
    assert _ids([next(again)]) == [whole[3][2:]]


@pytest.mark.parametrize("read_threads", [0, 2])
def test_dataset_iterator_checkpoint_resumes_at_the_same_element(source: HotpotQASource, read_threads: int) -> None:
    ds = make_pipeline(source, batch_size=2, seed=4, num_epochs=None, read_threads=read_threads)
    it = iter(ds)
    for _ in range(5):
        next(it)
    state = it.get_state()
    expected = _ids([next(it) for _ in range(6)])
    state = json.loads(json.dumps(state))  # the state survives serialisation
    resumed = iter(ds)
    resumed.set_state(state)
    assert _ids([next(resumed) for _ in range(6)]) == expected
    fresh = iter(make_pipeline(source, batch_size=2, seed=4, num_epochs=None, read_threads=read_threads))
    assert _ids([next(fresh) for _ in range(11)])[5:] == expected


def test_dataloader_checkpoint_resumes_at_the_same_element(source: HotpotQASource) -> None:
    loader = make_dataloader(source, batch_size=3, seed=2, num_epochs=3)
    it = iter(loader)
    for _ in range(2):
        next(it)
    state = it.get_state()
    expected = _ids(list(it))
    resumed = iter(make_dataloader(source, batch_size=3, seed=2, num_epochs=3))
    resumed.set_state(state)
    assert _ids(list(resumed)) == expected and len(expected) == 6


def test_ruler_source_interleaves_tasks() -> None:
    gen = RulerGenerator(RulerConfig(target_tokens=400, seed=0), tokenizer=Tokenizer.default(),
                         tasks=without_essay(TASKS), squad=load_squad(FIX / "squad_dev_excerpt.json"))
    src = RulerSource(gen, ["niah_single_1", "vt", "qa_1"], num_samples=3)
    assert len(src) == 9 and "target_tokens=400" in repr(src)
    assert [src[i]["task"] for i in range(4)] == ["niah_single_1", "vt", "qa_1", "niah_single_1"]
    assert src[4] == gen.sample("vt", 1).to_dict()
    batch = next(iter(make_pipeline(src, batch_size=4, seed=0)))
    assert len(batch) == 4 and all(r["num_tokens"] <= 400 for r in batch)
    with pytest.raises(ValueError, match="has 52 questions < num_samples=53"):
        RulerSource(gen, ["qa_1"], num_samples=53)
    with pytest.raises(KeyError):
        RulerSource(gen, ["nope"], num_samples=1)
    with pytest.raises(ValueError, match="needs a hotpotqa corpus"):
        RulerSource(gen, ["qa_2"], num_samples=1)
