"""LongMemEval loader (the project's fixture in the released layout), the bad-input table (every malformed field: one
line naming the file, the question and the field), the LoCoMo view the systems read, and the `stats` command."""

import copy
import json
from pathlib import Path

import pytest

from memjax.data.longmemeval import QUESTION_TYPES, LongMemEvalError, load_longmemeval, main
from memjax.data.longmemeval_locomo import as_locomo, locomo_date

FIXTURE = Path(__file__).parents[2] / "fixtures" / "data" / "longmemeval_fixture.json"
RAW = json.loads(FIXTURE.read_text())


def test_fixture_records():
    data = load_longmemeval(FIXTURE)
    assert len(data.questions) == 8 and {q.question_type for q in data.questions} == set(QUESTION_TYPES)
    assert [q.question_id for q in data.questions if q.abstention] == ["mj_ssu_2_abs", "mj_tr_2_abs"]
    ms = data.question("mj_ms_1")
    assert ms.answer == "3"                                    # an integer answer, kept as the judge formats it
    assert [s.session_id for s in ms.sessions] == ["answer_ms_1", "s_ms_x", "answer_ms_2"]
    assert ms.answer_turns() == [(0, 0), (2, 0)] and ms.answer_session_ids == ("answer_ms_1", "answer_ms_2")
    assert ms.sessions[1].date == "2024/06/05 (Wed) 15:30" and ms.sessions[0].turns[1].role == "assistant"


def test_locomo_view():
    q = load_longmemeval(FIXTURE).question("mj_ms_1")
    conv, lq = as_locomo(q)
    assert conv.sample_id == lq.conversation == "mj_ms_1" and (conv.speaker_a, conv.speaker_b) == ("user", "assistant")
    assert [s.date_time for s in conv.sessions] == ["10:00 am on 1 June, 2024", "3:30 pm on 5 June, 2024",
                                                    "6:10 pm on 12 June, 2024"]
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D2:1", "D2:2", "D3:1", "D3:2"]
    assert conv.turns[0].speaker == "user" and conv.turns[0].text == "I just bought a second-hand cello!"
    assert lq.evidence == ("D1:1", "D3:1") and lq.category == 1 and lq.answer == "3"
    assert lq.question == "How many musical instruments do I currently own? (asked on 9:00 pm on 20 June, 2024)"
    assert as_locomo(q, question_date=False)[1].question == q.question
    assert locomo_date("2023/05/20 (Sat) 00:05") == "12:05 am on 20 May, 2023" and locomo_date("May 2023") == "May 2023"


def _bad(tmp_path, mutate, name="bad.json"):
    raw = copy.deepcopy(RAW)
    mutate(raw)
    p = tmp_path / name
    p.write_text(json.dumps(raw))
    return p


def _del(key):
    return lambda r: r[0].pop(key)


def _set(key, value):
    return lambda r: r[0].__setitem__(key, value)


# mutation of the first question (mj_ssu_1) -> what the one-line error must name
BAD = [
    (_del("question_id"), "[0]: missing field 'question_id'"),
    (_set("question_id", 7), "[0].question_id: expected str, got int"),
    (_set("question_id", " "), "[0].question_id: empty"),
    (_del("question_type"), "[mj_ssu_1]: missing field 'question_type'"),
    (_set("question_type", "open-domain"), "[mj_ssu_1].question_type: 'open-domain' is not one of"),
    (_del("question"), "[mj_ssu_1]: missing field 'question'"),
    (_set("question", None), "[mj_ssu_1].question: expected str, got NoneType"),
    (_del("answer"), "[mj_ssu_1]: missing field 'answer'"),
    (_set("answer", True), "[mj_ssu_1].answer: expected str or int or float, got bool"),
    (_set("answer", ["a"]), "[mj_ssu_1].answer: expected str or int or float, got list"),
    (_del("question_date"), "[mj_ssu_1]: missing field 'question_date'"),
    (_del("haystack_session_ids"), "[mj_ssu_1]: missing field 'haystack_session_ids'"),
    (_set("haystack_session_ids", "s1"), "[mj_ssu_1].haystack_session_ids: expected list, got str"),
    (lambda r: r[0]["haystack_session_ids"].__setitem__(1, 3), "[mj_ssu_1].haystack_session_ids[1]: expected str"),
    (lambda r: r[0]["haystack_session_ids"].__setitem__(2, "s_ssu_a"),
     "[mj_ssu_1].haystack_session_ids: 's_ssu_a' listed twice"),
    (_del("haystack_dates"), "[mj_ssu_1]: missing field 'haystack_dates'"),
    (lambda r: r[0]["haystack_dates"].pop(), "[mj_ssu_1].haystack_sessions: 3 sessions but 3 haystack_session_ids "
                                             "and 2 haystack_dates"),
    (_del("haystack_sessions"), "[mj_ssu_1]: missing field 'haystack_sessions'"),
    (lambda r: r[0]["haystack_sessions"].__setitem__(0, {"role": "user"}),
     "[mj_ssu_1].haystack_sessions[0]: expected a list of turns, got dict"),
    (lambda r: r[0]["haystack_sessions"][1].__setitem__(0, "hi"),
     "[mj_ssu_1].haystack_sessions[1][0]: expected a JSON object, got str"),
    (lambda r: r[0]["haystack_sessions"][1][0].pop("role"),
     "[mj_ssu_1].haystack_sessions[1][0]: missing field 'role'"),
    (lambda r: r[0]["haystack_sessions"][1][0].__setitem__("role", "system"),
     "[mj_ssu_1].haystack_sessions[1][0].role: 'system' is not 'user' or 'assistant'"),
    (lambda r: r[0]["haystack_sessions"][1][1].__setitem__("content", 5),
     "[mj_ssu_1].haystack_sessions[1][1].content: expected str, got int"),
    (lambda r: r[0]["haystack_sessions"][1][0].__setitem__("has_answer", "yes"),
     "[mj_ssu_1].haystack_sessions[1][0].has_answer: expected true or false, got str"),
    (_del("answer_session_ids"), "[mj_ssu_1]: missing field 'answer_session_ids'"),
    (_set("answer_session_ids", [None]), "[mj_ssu_1].answer_session_ids[0]: expected str, got NoneType"),
    (lambda r: r.__setitem__(1, "question"), "[1]: expected a JSON object, got str"),
    (lambda r: r[1].__setitem__("question_id", "mj_ssu_1"), "[mj_ssu_1].question_id: listed twice"),
]


@pytest.mark.parametrize("mutate,message", BAD, ids=[m for _, m in BAD])
def test_bad_input_table(tmp_path, mutate, message):
    p = _bad(tmp_path, mutate)
    with pytest.raises(LongMemEvalError) as e:
        load_longmemeval(p)
    text = str(e.value)
    assert text.startswith(str(p)) and message in text and "\n" not in text, text


@pytest.mark.parametrize("content,message", [(None, "no such file"), ("{", "not readable JSON"),
                                             ("[]", "expected a non-empty JSON list of questions"),
                                             ('{"a": 1}', "expected a non-empty JSON list of questions")])
def test_bad_files(tmp_path, content, message):
    p = tmp_path / "f.json"
    if content is not None:
        p.write_text(content)
    with pytest.raises(LongMemEvalError, match=message):
        load_longmemeval(p)


def test_stats_command(tmp_path, capsys):
    assert main(["stats", str(FIXTURE)]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["questions"] == 8 and s["abstention"] == 2 and s["questions_per_type"]["temporal-reasoning"] == 2
    assert s["sessions"] == {"total": 20, "min": 2, "max": 3} and s["has_answer_turns"] == 11
    bad = _bad(tmp_path, _del("answer"))       # exit status 2, one line on stderr (`python -m` exits with main()'s)
    assert main(["stats", str(bad)]) == 2
    err = capsys.readouterr()
    assert err.out == "" and err.err == f"memjax.data.longmemeval: error: {bad}[mj_ssu_1]: missing field 'answer'\n"
