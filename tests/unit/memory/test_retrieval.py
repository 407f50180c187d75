"""Embedders (hashed BoW, wordllama, decoder mean-pool, file), the disk cache, and every search mode."""

from pathlib import Path

import numpy as np
import pytest

from memjax.data.locomo import load_locomo
from memjax.memory.embedders import (DecoderMeanPoolEmbedder, FileEmbedder, HashedBowEmbedder, cached_encode,
                                     l2_normalize)
from memjax.memory.retrieval import Hit, Retriever, conversation_records, rrf

FIXTURE = Path(__file__).parents[2] / "fixtures" / "data" / "locomo_fixture.json"


@pytest.fixture(scope="module")
def records():
    return conversation_records(load_locomo(FIXTURE).conversation("conv-26"))


def test_hashed_bow_is_deterministic_and_normalised():
    e = HashedBowEmbedder(dim=64)
    v = e.encode(["Buddy the dog", "the dog Buddy", "", "cello lessons"])
    assert v.dtype == np.float32 and v.shape == (4, 64)
    np.testing.assert_allclose(np.linalg.norm(v[[0, 1, 3]], axis=1), 1.0, rtol=1e-6)
    assert np.all(v[2] == 0)                                   # only stop words / empty -> zero vector
    np.testing.assert_array_equal(v[0], v[1])                  # bag of words
    np.testing.assert_array_equal(v, HashedBowEmbedder(dim=64).encode(["Buddy the dog", "the dog Buddy", "",
                                                                        "cello lessons"]))


def test_conversation_records_and_neighbours(records):
    assert [r.id for r in records[:3]] == ["D1:1", "D1:2", "D1:3"]
    assert records[2].content.endswith("[Sent an image showing a photo of a small dog on grass]")
    assert records[4].session == 2 and records[4].session_time == "4:30 pm on 20 March, 2023"
    conv = load_locomo(FIXTURE).conversation("conv-26")
    assert conversation_records(conv, with_speaker=True)[1].content == "Ben: Congrats Ada! What breed is Buddy?"
    assert "[Sent an image" not in conversation_records(conv, with_captions=False)[2].content
    r = Retriever(records)
    assert [x.id for x in r.neighbours(4, 2)] == ["D1:3", "D1:4", "D2:1", "D2:2", "D2:3"]
    assert [x.id for x in r.neighbours(4, 2, same_session=True)] == ["D2:1", "D2:2", "D2:3"]
    assert [x.id for x in r.neighbours(0, 1)] == ["D1:1", "D1:2"]
    with pytest.raises(IndexError):
        r.neighbours(99)
    hit = lambda i: Hit(i, 1.0, records[i])
    # hits D2:3 (6) and D1:1 (0), k=1: windows [5, 6] and [0, 1], in hit order
    assert [[x.id for x in w] for w in r.with_context([hit(6), hit(0)], 1)] == [["D2:2", "D2:3"], ["D1:1", "D1:2"]]
    # D1:2 (1) and D1:4 (3) with k=1 touch -> one window, merged with D2:1 (4) too
    assert [[x.id for x in w] for w in r.with_context([hit(3), hit(1), hit(4)], 1)] == [
        ["D1:1", "D1:2", "D1:3", "D1:4", "D2:1", "D2:2"]]
    assert [[x.id for x in w] for w in r.with_context([hit(3), hit(4)], 1, same_session=True)] == [
        ["D1:3", "D1:4"], ["D2:1", "D2:2"]]


def test_semantic_filters_threshold_and_keyword(records, tmp_path):
    r = Retriever(records, HashedBowEmbedder(dim=512), cache_dir=tmp_path)
    hits = r.semantic("which dog did Ada adopt from the shelter", k=3)
    assert hits[0].record.id == "D2:1" and hits[0].score >= hits[1].score >= hits[2].score
    assert all(h.record.speaker == "Ben" for h in r.semantic("dog", k=5, speaker="ben"))
    assert {h.record.session for h in r.semantic("dog", k=5, session=1)} == {1}
    assert all(h.score >= 0.2 for h in r.semantic("dog adopted", k=10, threshold=0.2))
    assert [h.record.id for h in r.keyword(["dog", "adopted"])] == ["D1:1", "D2:1"]
    assert [h.record.id for h in r.keyword(["ben", "painting"])] == ["D1:4", "D2:2"]     # speaker is metadata
    assert [h.record.id for h in r.keyword(["20 march", "lisbon"])] == ["D2:3"]          # session time too
    assert r.keyword(["dog"], session=2, speaker="Ada")[0].record.id == "D2:1"
    assert r.keyword([]) == []


def test_bm25_and_rrf(records):
    r = Retriever(records)
    hits = r.bm25("marathon Lisbon", k=5)
    assert [h.record.id for h in hits] == ["D2:3"]
    assert r.bm25("zebra") == [] and r.bm25("painting", speaker="Ada") == []
    with pytest.raises(ValueError, match="without an embedder"):
        r.semantic("x")
    # rrf: 2 scores 1/61 + 1/62, 7 scores 1/61, 5 scores 1/62; ties go to the lower index
    assert rrf([[2, 5], [7, 2]]) == [2, 7, 5]
    assert rrf([[4], [3]]) == [3, 4]


def test_cache_and_file_embedder(tmp_path):
    class Counting(HashedBowEmbedder):
        calls = 0

        def encode(self, texts):
            Counting.calls += 1
            return super().encode(texts)

    e = Counting(dim=32)
    a = cached_encode(e, ["x y", "z"], tmp_path)
    b = cached_encode(e, ["x y", "z"], tmp_path)
    assert Counting.calls == 1 and np.array_equal(a, b) and len(list(tmp_path.glob(f"{e.id}-*.npy"))) == 1
    cached_encode(e, ["x y", "w"], tmp_path)
    assert Counting.calls == 2
    vec = np.array([[3.0, 4.0], [1.0, 0.0]], np.float32)
    np.savez(tmp_path / "v.npz", keys=np.array(["a", "b"]), vectors=vec)
    f = FileEmbedder(tmp_path / "v.npz")
    np.testing.assert_allclose(f.encode(["b", "a"]), [[1, 0], [0.6, 0.8]])
    with pytest.raises(KeyError, match="v.npz: no vector"):
        f.encode(["c"])
    np.save(tmp_path / "v.npy", vec)
    np.testing.assert_allclose(FileEmbedder(tmp_path / "v.npy", keys=["a", "b"]).encode(["a"]), [[0.6, 0.8]])
    with pytest.raises(ValueError, match="needs `keys`"):
        FileEmbedder(tmp_path / "v.npy")
    assert np.all(l2_normalize(np.zeros((1, 3))) == 0)


def test_wordllama_offline(monkeypatch):
    pytest.importorskip("wordllama")
    import socket

    def no_network(*a, **k):
        raise OSError("network disabled in test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    from memjax.memory.embedders import WordLlamaEmbedder

    e = WordLlamaEmbedder()
    v = e.encode(["I adopted a puppy last week", "We got a new dog", "The bond market fell sharply"])
    assert v.shape == (3, 256) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def test_decoder_mean_pool_matches_unpadded_forward():
    import jax.numpy as jnp

    from memjax.model import presets
    from memjax.model.qwen2 import init_model

    model = init_model(presets.get("tiny"), seed=0)
    tok = lambda s: [ord(c) % 500 + 1 for c in s]
    e = DecoderMeanPoolEmbedder(model, tok, name="tiny", batch_size=4)
    texts = ["hi dog", "cats", "x"]                           # one padded shape [4, 8]: one compile
    v = e.encode(texts)
    assert v.shape == (3, 64)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)
    # right padding (6 tokens padded to 8) must not change the pooled state: one unpadded eager reference
    h, _ = model.forward(jnp.asarray([tok(texts[0])], jnp.int32), return_hidden=True)
    np.testing.assert_allclose(v[0], l2_normalize(np.asarray(h[0]).mean(0)), atol=2e-5)
    assert float(v[0] @ v[1]) < 0.9999


REAL = Path(__file__).parents[3] / ".." / "shared" / "data" / "locomo" / "locomo10.json"


@pytest.mark.skipif(not REAL.exists(), reason="LoCoMo (CC BY-NC) not present at ../shared/data/locomo")
def test_real_locomo_bm25_finds_evidence():
    data = load_locomo(REAL)
    conv = data.conversation("conv-26")
    r = Retriever(conversation_records(conv))
    q = conv.questions[0]                           # "When did Caroline go to the LGBTQ support group?" -> D1:3
    assert q.evidence == ("D1:3",)
    assert "D1:3" in [h.record.id for h in r.bm25(q.question, k=5)]
    assert len(r.records) == len(conv.turns) == 419
