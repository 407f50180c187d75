"""LoCoMo loader, quirk counts, splits and the `stats` CLI (fixture always; the real file when ../shared has it)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memjax.data.locomo import LocomoError, load_locomo
from memjax.data.locomo_stats import main, stats
from memjax.data.locomo_splits import split_questions, sumer_train_id

FIXTURE = Path(__file__).parents[2] / "fixtures" / "data" / "locomo_fixture.json"
REAL = Path(__file__).parents[3] / ".." / "shared" / "data" / "locomo" / "locomo10.json"
needs_real = pytest.mark.skipif(not REAL.exists(), reason="LoCoMo (CC BY-NC) not present at ../shared/data/locomo")


def test_fixture_records_and_quirks():
    data = load_locomo(FIXTURE)
    c = data.conversation("conv-26")
    assert [s.index for s in c.sessions] == [1, 2]
    assert c.sessions[1].date_time == "4:30 pm on 20 March, 2023"
    assert len(c.turns) == 7 and c.turns[2].image_caption == "a photo of a small dog on grass"
    assert c.turns[2].image_urls == ("https://example.invalid/buddy.jpg",) and c.turns[2].image_query == "beagle park"
    assert c.turns[2].display_text().endswith("[Sent an image showing a photo of a small dog on grass]")
    q = c.questions
    assert q[1].answer == "2022" and q[2].answer == "2"
    assert q[2].evidence == ("D1:1", "D2:1")
    assert q[3].evidence == ("D2:2",)
    assert q[4].evidence == ("D2:3", "D1:3")
    assert q[5].evidence == () and q[5].evidence_raw == ("D",)
    assert q[6].evidence == ()
    assert q[7].evidence == ("D2:2",)
    assert q[8].answer is None and q[8].adversarial_answer == "Scout"
    assert q[9].answer == "No" and q[9].category == 5
    assert data.report.counts() == {
        "orphan_date_keys": 2, "sessions_without_date": 0, "non_string_answers": 2, "category5_without_answer": 1,
        "category5_with_answer": 1, "evidence_split": 2, "evidence_repaired": 2, "evidence_unparseable": 1,
        "evidence_unknown": 1, "questions_without_evidence": 2, "turns_with_image": 1,
        "turns_unknown_speaker": 1}


def test_fixture_splits_and_stats():
    data = load_locomo(FIXTURE)
    r1 = split_questions(data, "memory_r1")
    assert [len(v) for v in r1.values()] == [8, 2, 0]     # category 5 excluded
    s = stats(data)
    assert s["conversations"] == 2 and s["sessions"] == 3 and s["turns"] == 10 and s["questions"] == 12
    assert s["questions_per_category"]["5 adversarial"] == 2
    with pytest.raises(KeyError, match="memory_r2.train"):
        split_questions(data, "memory_r2")
    assert "memory_r2" in s["splits"] and "error" in s["splits"]["memory_r2"]


def test_sumer_shuffle_rule():
    ids = ["conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47", "conv-48", "conv-49",
           "conv-50"]
    assert sumer_train_id(ids) == "conv-48"


@pytest.mark.parametrize("content, msg", [
    ("{not json", "not readable JSON"),
    ("[]", "non-empty JSON list"),
    ('[{"sample_id": "x", "conversation": {"speaker_a": "A"}, "qa": []}]', "missing field 'speaker_b'"),
    ('[{"sample_id": "x", "conversation": {"speaker_a": "A", "speaker_b": "B"}, '
     '"qa": [{"question": "q", "category": 9}]}]', r"bad.json\[0\]\[x\]\.qa\[0\]\.category: 9 not in 1..5"),
    ('[{"sample_id": "x", "conversation": {"speaker_a": "A", "speaker_b": "B", "session_1": [{"speaker": "A", '
     '"dia_id": "turn one", "text": "hi"}]}, "qa": []}]', r"session_1\[0\]\.dia_id: malformed 'turn one'"),
])
def test_malformed_files(tmp_path, content, msg):
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(LocomoError, match=msg):
        load_locomo(p)


def test_cli_exit_codes(tmp_path, capsys):
    assert main(["stats", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file" in err
    assert main(["stats", str(FIXTURE)]) == 0
    assert json.loads(capsys.readouterr().out)["turns"] == 10


@pytest.mark.e2e
@needs_real
def test_real_locomo_stats_and_splits():
    out = subprocess.run([sys.executable, "-m", "memjax.data.locomo_stats", "stats", str(REAL)], capture_output=True,
                         text=True, check=True).stdout
    s = json.loads(out)
    assert (s["conversations"], s["sessions"], s["turns"], s["questions"]) == (10, 272, 5882, 1986)
    assert list(s["questions_per_category"].values()) == [282, 321, 96, 841, 446]
    sp = s["splits"]
    assert (sp["sumer"]["train"]["questions"], sp["sumer"]["validation"]["questions"]) == (191, 1349)
    assert [sp["memory_r1"][p]["questions"] for p in ("train", "validation", "test")] == [152, 81, 1307]
    assert sp["memory_r2"]["test"]["questions"] == 1085
    assert s["quirks"]["orphan_date_keys"] == 16 and s["quirks"]["non_string_answers"] == 6
    data = load_locomo(REAL)
    assert split_questions(data, "sumer")["train"][0].conversation == "conv-48"
