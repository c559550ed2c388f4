"""Prompt suites are deterministic per seed, plant each answer only at answer_positions, follow the seed's templates, respect pad/length, and refuse tokenizers that cannot host them."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from attnlab.tasks import (
    SUITES,
    SuiteError,
    answer_correct,
    answer_keys,
    build_suite,
    decoy_hit,
    generic_text,
    is_chat,
    max_new_tokens,
)
from attnlab.tasks.suites import parse_passages
from attnlab.tasks.text import lexicon
from attnlab.tasks.token_suites import bundled_passages
from offline import build_tokenizer

CUES = ("secret", "word", "pass", "key", "magic", "uuid", "special")
# Small settings per suite so the whole file stays fast.
PASSAGES = """# a comment line, not a passage
## The River | A. Writer | 1900 | test
The river ran past the old mill every morning, and the miller counted the boats that went by, one by one,
until the sun was high and the water turned from grey to green and the children came down to the bank.

Untitled second passage: the brown dog slept under the table while the cat watched the birds in the garden,
and nobody in the house said a word about the broken window or the missing cake.

## Third | Someone | 1910 | test
Short passages are fine as long as they hold enough tokens: the wind blew over the hill and the sheep
moved slowly toward the barn where the farmer waited with his lamp and his dog.
"""
SMALL = {
    "niah": {"pad": 6},
    "passkey_niah": {"pad": 6},
    "uuid_niah": {"pad": 6},
    "induction": {"length": 64},
    "mqar": {"length": 64},
    "copying": {"pad": 20},
    "niah_multi": {"pad": 6},
    "niah_decoy": {"pad": 6},
    "ruler_multikey": {"pad": 6},
    "literary": {"pad": 20, "passages": PASSAGES},
}


@pytest.fixture(scope="module", params=["word", "bpe"])
def tok(request, tmp_path_factory):
    return build_tokenizer(tmp_path_factory.mktemp(request.param), request.param)


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    return build_tokenizer(tmp_path_factory.mktemp("bpe"), "bpe")


@pytest.fixture(scope="module")
def word(tmp_path_factory):
    return build_tokenizer(tmp_path_factory.mktemp("word"), "word")


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _find(ids, seq) -> list[int]:
    """Start positions of ``seq`` in ``ids`` by brute force."""
    seq = list(seq)
    return [i for i in range(len(ids) - len(seq) + 1) if list(ids[i : i + len(seq)]) == seq]


def _text(tokenizer, ids) -> str:
    """The decoded prompt, lowercased and without the spaces a word-level decoder puts before punctuation."""
    return re.sub(r" ([.,:?!])", r"\1", tokenizer.decode(list(ids), skip_special_tokens=True).lower())


def _bos(tokenizer) -> list[int]:
    return [] if tokenizer.bos_token_id is None else [tokenizer.bos_token_id]


def test_registry_names():
    assert {"niah", "induction", "mqar", "copying", "uuid_niah", "passkey_niah"} <= set(SUITES)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_same_seed_same_prompts_other_seed_other_prompts(tok, name):
    first = build_suite(name, tok, 3, seed=5, **SMALL[name])
    assert first == build_suite(name, tok, 3, seed=5, **SMALL[name])
    assert first == SUITES[name](tok, 3, seed=5, **SMALL[name])
    # prompt i does not depend on how many prompts were asked for
    assert first[:2] == build_suite(name, tok, 2, seed=5, **SMALL[name])
    other = build_suite(name, tok, 3, seed=6, **SMALL[name])
    assert all(a.input_ids != b.input_ids for a, b in zip(first, other))
    assert len({p.input_ids for p in first}) == 3
    assert [p.index for p in first] == [0, 1, 2] and {p.suite for p in first} == {name}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_input_starts_with_the_tokenizers_bos_and_holds_no_special_token(tok, name):
    bos = _bos(tok)
    for p in build_suite(name, tok, 3, **SMALL[name]):
        assert list(p.input_ids[: len(bos)]) == bos
        assert not set(p.input_ids[len(bos) :]) & set(tok.all_special_ids)


def test_niah_needle_only_where_planted_and_template(tok):
    prompts = build_suite("niah", tok, 30, seed=1, pad=8)
    assert len({p.meta["needle"] for p in prompts}) == 30  # a fresh needle per prompt while the pool lasts
    for p in prompts:
        needle = p.meta["needle"]
        [token] = _ids(tok, " " + needle)  # the needle is a single token with its leading space
        ids = list(p.input_ids)
        assert [i for i, t in enumerate(ids) if t == token] == list(p.answer_positions)
        assert p.answer_ids == (token,)
        assert _text(tok, ids[: p.answer_positions[0]]) == "the secret word is"
        whole = _text(tok, ids)
        assert whole.startswith(f"the secret word is {needle}.")
        assert whole.endswith(". the secret word is")
        haystack = whole[len(f"the secret word is {needle}.") : -len("the secret word is")]
        assert haystack.count(".") == 8 == p.meta["pad"]
        assert not any(cue in haystack for cue in CUES)
        assert needle not in re.findall(r"[a-z]+", haystack)


def test_long_haystacks_never_repeat_the_needle(tok):
    # 200 sentences draw each noun several times over, so only screening the needle out can keep it unique
    for p in build_suite("niah", tok, 2, pad=200):
        [token] = _ids(tok, " " + p.meta["needle"])
        assert [i for i, t in enumerate(p.input_ids) if t == token] == list(p.answer_positions)


def test_niah_text_round_trips_with_bpe(bpe):
    for p in build_suite("niah", bpe, 5, seed=2, pad=3):
        text = bpe.decode(p.input_ids)
        assert bpe(text, add_special_tokens=False)["input_ids"] == list(p.input_ids)
        assert bpe(text + " " + p.meta["needle"], add_special_tokens=False)["input_ids"][-1] == p.answer_ids[0]


def test_bpe_splits_some_nouns_and_niah_uses_only_single_token_ones(bpe):
    nouns = lexicon()["nouns"]
    single = {n for n in nouns if len(_ids(bpe, " " + n)) == 1}
    assert 20 <= len(single) < len(nouns)
    assert {p.meta["needle"] for p in build_suite("niah", bpe, 40, pad=0)} <= single


def test_uuid_niah_value_only_where_planted(tok):
    for p in build_suite("uuid_niah", tok, 6, seed=3, pad=10):
        key, value = p.meta["key"], p.meta["value"]
        assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", value)
        answer = _ids(tok, " " + value)
        assert list(p.answer_ids) == answer
        start = _find(p.input_ids, answer)
        assert start == [p.answer_positions[0]]
        assert list(p.answer_positions) == list(range(start[0], start[0] + len(answer)))
        [k] = _ids(tok, " " + key)
        assert list(p.input_ids).count(k) == 3  # the needle and the question's two mentions
        whole = _text(tok, p.input_ids)
        assert whole.startswith(
            "some special magic uuids are hidden within the following text. make sure to "
            "memorize it. i will quiz you about the uuids afterwards."
        )
        assert f"one of the special magic uuids for {key} is:" in whole
        assert whole.endswith(
            f"what are all the special magic uuids for {key} mentioned in the provided text? "
            f"the special magic uuids for {key} mentioned in the provided text are"
        )
        assert whole.count(".") - 4 == 10 == p.meta["pad"]  # 3 periods in the intro, 1 after the needle


def test_uuid_niah_needle_depth_varies(bpe):
    depths = {p.meta["depth"] for p in build_suite("uuid_niah", bpe, 12, pad=10)}
    assert len(depths) > 3 and depths <= set(range(11))


def test_passkey_only_where_planted(bpe):
    for p in build_suite("passkey_niah", bpe, 6, pad=4):
        key = p.meta["pass_key"]
        assert re.fullmatch(r"[A-Z0-9]{8}", key)
        text = bpe.decode(p.input_ids)
        assert text.startswith(f"The pass key is {key}.") and text.endswith(". The pass key is")
        assert text.count(key) == 1
        assert _find(p.input_ids, p.answer_ids) == [p.answer_positions[0]]


def test_induction_answer_is_the_token_after_the_first_occurrence(tok):
    bos = _bos(tok)
    for p in build_suite("induction", tok, 4, length=101):
        ids = list(p.input_ids)
        assert len(ids) == 101
        body = ids[len(bos) :]
        assert len(set(body[: len(body) // 2 + 1])) == len(body) // 2 + 1  # a segment of distinct tokens
        first = ids.index(ids[-1])
        assert first < len(ids) - 1
        assert p.answer_ids == (ids[first + 1],) and p.answer_positions == (first + 1,)
        assert ids.count(ids[first + 1]) == 1
        # the prompt ends by repeating the segment from its start up to the query token
        repeat = first + 1 - len(bos)
        assert body[-repeat:] == body[:repeat] and repeat == len(body) - (len(body) // 2 + 1)


def test_answer_keys_point_after_the_query_tokens_first_occurrence(tok):
    for p in build_suite("induction", tok, 2, length=60):
        ids = list(p.input_ids)
        keys = answer_keys(p)
        expected = {q: ids.index(ids[q]) + 1 for q in range(len(ids)) if ids.index(ids[q]) < q}
        assert keys == expected and keys[len(ids) - 1] == p.answer_positions[0]
    for p in build_suite("niah", tok, 2, pad=2):
        assert answer_keys(p) == {len(p.input_ids) - 1: p.answer_positions[0]}


def test_mqar_answer_is_the_value_stored_for_the_last_key(tok):
    bos = _bos(tok)
    for p in build_suite("mqar", tok, 4, length=90):
        ids = list(p.input_ids)
        assert 87 <= len(ids) <= 90
        body = ids[len(bos) :]
        pairs = (len(body) + 1) // 4
        store = dict(zip(body[0 : 2 * pairs : 2], body[1 : 2 * pairs : 2]))
        assert len(store) == pairs and not set(store) & set(store.values())
        queries = body[2 * pairs :]
        assert all(store[k] == v for k, v in zip(queries[0::2], queries[1::2]))
        assert sorted(queries[0::2]) == sorted(store)  # every key is queried once
        last = queries[-1]
        assert p.answer_ids == (store[last],)
        assert [i for i, t in enumerate(ids) if t == store[last]] == list(p.answer_positions)
        assert ids[p.answer_positions[0] - 1] == last


def test_copying_repeats_the_passage_start_after_the_padding(tok):
    bos = _bos(tok)
    for p in build_suite("copying", tok, 4, pad=30):
        ids = list(p.input_ids)
        passage = _ids(tok, p.meta["passage"])
        copied = p.meta["copied"]
        assert ids == bos + passage + ids[len(bos) + len(passage) : -copied] + passage[:copied]
        noise = ids[len(bos) + len(passage) : -copied]
        assert len(noise) == 30 and not set(noise) & set(passage)
        assert p.answer_ids == (passage[copied],) and p.answer_positions == (len(bos) + copied,)
        assert ids.count(passage[copied]) == 1
        assert copied >= len(passage) // 2
        assert not any(cue in p.meta["passage"].lower() for cue in CUES)


@pytest.mark.parametrize("name,length", [("niah", 300), ("uuid_niah", 400), ("passkey_niah", 250)])
def test_text_suites_fill_to_length_without_exceeding(tok, name, length):
    for p in build_suite(name, tok, 4, length=length):
        # short by less than one sentence (every generated sentence is under 40 tokens)
        assert length - 40 < len(p.input_ids) <= length


def test_copying_length_is_exact(tok):
    assert {len(p.input_ids) for p in build_suite("copying", tok, 4, length=200)} == {200}


def test_tiny_tokenizer_is_refused_with_its_name(tmp_path):
    tiny = build_tokenizer(tmp_path / "tiny-vocab", "tiny")
    for name in ("niah", "uuid_niah", "passkey_niah", "copying"):
        with pytest.raises(SuiteError, match="tiny-vocab") as err:
            build_suite(name, tiny, 2)
        assert "unknown token" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(SuiteError, match=r"tiny-vocab.*use length <="):
        build_suite("induction", tiny, 2)


def test_length_bounds_are_exact(word):
    pool = len(word) - len(word.all_special_ids)
    top = 2 * pool - 1 + 1  # a segment of all ordinary tokens, one fewer repeated, and BOS
    with pytest.raises(SuiteError, match=f"use length <= {top}"):
        build_suite("induction", word, 1, length=top + 1)
    assert len(build_suite("induction", word, 1, length=top)[0].input_ids) == top
    most = 4 * (pool // 2) + 2 + 1  # pool // 2 pairs; a body of 4 * pairs + 3 would need one pair more
    with pytest.raises(SuiteError, match=f"use length <= {most}"):
        build_suite("mqar", word, 1, length=most + 1)
    assert build_suite("mqar", word, 1, length=most)[0].meta["pairs"] == pool // 2
    with pytest.raises(SuiteError, match=r"use length >= (\d+)") as err:
        build_suite("niah", word, 1, length=5)
    least = int(re.search(r"use length >= (\d+)", str(err.value)).group(1))
    assert build_suite("niah", word, 1, length=least)[0].meta["pad"] == 0


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"name": "nope"}, "unknown suite 'nope'; choose one of: niah"),
        ({"n_prompts": 0}, "n_prompts must be an int >= 1"),
        ({"seed": -1}, "seed must be an int >= 0"),
        ({"pad": 3, "length": 100}, "pass pad or length, not both"),
        ({"name": "induction", "pad": 3}, "induction takes length, not pad"),
        ({"length": 2.5}, "length must be an int"),
    ],
)
def test_bad_arguments(word, kwargs, match):
    args = {"name": "niah", "n_prompts": 2} | kwargs
    with pytest.raises(SuiteError, match=match):
        build_suite(args.pop("name"), word, args.pop("n_prompts"), **args)


def test_not_a_tokenizer():
    with pytest.raises(SuiteError, match="expected a Hugging Face tokenizer"):
        build_suite("niah", object(), 1)


def test_max_new_tokens_follow_the_seed():
    assert {n: max_new_tokens(n) for n in SMALL} == {
        "niah": 1,
        "induction": 1,
        "mqar": 1,
        "copying": 1,
        "uuid_niah": 56,
        "passkey_niah": 24,
        "niah_multi": 1,
        "niah_decoy": 1,
        "ruler_multikey": 56,
        "literary": 1,
    }


def test_answer_correct_single_token(bpe):
    p = build_suite("niah", bpe, 1, pad=2)[0]
    right, wrong = p.answer_ids[0], (p.answer_ids[0] + 1) % len(bpe)
    assert answer_correct(p, [right, wrong])
    assert answer_correct(p, torch.tensor([right]))
    assert not answer_correct(p, [wrong, right])
    assert not answer_correct(p, [])
    with pytest.raises(SuiteError, match="1-D"):
        answer_correct(p, np.array([[right]]))


def test_answer_correct_uuid_is_a_substring_of_the_decoded_generation(tok):
    p = build_suite("uuid_niah", tok, 1, pad=2)[0]
    value = p.meta["value"]
    said = _ids(tok, f" {value}. It was")
    assert answer_correct(p, said, tok)
    assert answer_correct(p, list(p.answer_ids) + _ids(tok, " and more"), tok)
    other = value[:-1] + ("0" if value[-1] != "0" else "1")
    assert not answer_correct(p, _ids(tok, f" {other}."), tok)
    late = _ids(tok, " the" * 56) + list(p.answer_ids)  # past the seed's 56 scored tokens
    assert not answer_correct(p, late, tok)
    with pytest.raises(SuiteError, match="scored on decoded text"):
        answer_correct(p, said)


def test_answer_correct_passkey(tok):
    p = build_suite("passkey_niah", tok, 1, pad=2)[0]
    assert answer_correct(p, list(p.answer_ids), tok)
    assert not answer_correct(p, _ids(tok, " the"), tok)


def test_generic_text_is_deterministic_exact_and_cue_free():
    text = generic_text(500, 0)
    assert text == generic_text(500, 0) != generic_text(500, 1)
    assert len(text.split()) == 500
    assert not any(cue in text.lower() for cue in CUES)


def test_generic_text_shares_no_sentence_with_the_suites(bpe):
    held_out = set(generic_text(3000, 0).split(". "))
    for p in build_suite("niah", bpe, 5, pad=40) + build_suite("copying", bpe, 5, pad=0):
        suite_text = p.meta.get("passage") or bpe.decode(p.input_ids)
        assert not held_out & set(suite_text.split(". "))


def test_word_lists_hold_no_cue_and_no_duplicate():
    words = [w for ws in lexicon().values() for w in ws]
    assert len(lexicon()["nouns"]) >= 200
    assert len(words) == len(set(words))
    assert all(re.fullmatch(r"[a-z]+", w) for w in words)
    assert not [w for w in words if any(cue in w for cue in CUES)]
    with pytest.raises(ValueError, match="n_words"):
        generic_text(0, 0)


def test_suite_stream_ids_never_change():
    """A suite's stream id is the second word of every seed it draws: changing one changes every prompt."""
    assert {name: s.stream for name, s in SUITES.items()} == {
        "niah": 1,
        "induction": 2,
        "mqar": 3,
        "copying": 4,
        "uuid_niah": 5,
        "passkey_niah": 6,
        "niah_multi": 7,
        "niah_decoy": 8,
        "ruler_multikey": 9,
        "literary": 10,
    }


def test_user_suite_registers_with_its_own_stream(bpe):
    import zlib

    from attnlab.tasks.seqtask import USER_STREAMS
    from attnlab.tasks.suites import Prompt, register_suite, suite

    @suite("first_token_test", "the first token again", "a user's notes")
    def _first(tok, n_prompts, seed, length, pad):
        return [Prompt((7, 8, 9, 7), (8,), (1,), "first_token_test", i, {}) for i in range(n_prompts)]

    try:
        assert SUITES["first_token_test"].stream == USER_STREAMS + zlib.crc32(b"first_token_test")
        assert [p.answer_ids for p in build_suite("first_token_test", bpe, 2)] == [(8,), (8,)]
        with pytest.raises(ValueError, match="already registered"):
            register_suite(SUITES["first_token_test"])
        with pytest.raises(ValueError, match="stream id 1 is suite 'niah'"):
            suite("other_test", "x", "y", stream=1)(_first)
    finally:
        SUITES.unregister("first_token_test")
    with pytest.raises(SuiteError, match="unknown suite 'first_token_test'"):
        build_suite("first_token_test", bpe, 1)


@pytest.fixture
def bos_not_added(tmp_path):
    """A tokenizer that has a BOS token but adds none itself, as SmolLM2's."""
    tok = build_tokenizer(tmp_path, "bpe")
    tok.add_special_tokens({"bos_token": "<s>"})
    assert tok("a", add_special_tokens=True)["input_ids"] == tok("a", add_special_tokens=False)["input_ids"]
    return tok


@pytest.mark.parametrize("name", sorted(SMALL))
def test_bos_starts_every_prompt_with_the_bos_token(bos_not_added, name):
    led = build_suite(name, bos_not_added, 3, seed=2, bos=True, **SMALL[name])
    assert all(p.input_ids[0] == bos_not_added.bos_token_id for p in led)
    assert all(bos_not_added.bos_token_id not in p.input_ids[1:] for p in led)


def test_bos_adds_one_leading_token_where_the_tokenizer_adds_none(bos_not_added, tmp_path):
    plain = build_suite("niah", bos_not_added, 3, seed=2, pad=6)
    led = build_suite("niah", bos_not_added, 3, seed=2, pad=6, bos=True)
    assert [p.input_ids for p in led] == [(bos_not_added.bos_token_id, *p.input_ids) for p in plain]
    assert [p.answer_positions for p in led] == [tuple(a + 1 for a in p.answer_positions) for p in plain]
    adds = build_tokenizer(tmp_path / "word", "word")  # adds its BOS already: nothing changes
    assert build_suite("niah", adds, 2, pad=4, bos=True) == build_suite("niah", adds, 2, pad=4)


def test_bos_without_a_bos_token_is_refused(bpe):
    assert bpe.bos_token_id is None
    with pytest.raises(SuiteError, match="has no BOS token"):
        build_suite("niah", bpe, 1, pad=2, bos=True)


HAYSTACK = " ".join(
    f"The {w} river runs past the old mill number {i}."
    for i, w in enumerate(["quiet", "broad", "cold", "slow", "green", "deep", "long", "dark", "wide", "clear"])
)


@pytest.mark.parametrize("name", ["niah", "uuid_niah", "passkey_niah"])
def test_a_users_haystack_fills_the_niah_haystacks(bpe, name):
    from attnlab.tasks.text import split_sentences

    sentences = split_sentences(HAYSTACK)
    assert len(sentences) == 10 and sentences[3] == "The slow river runs past the old mill number 3."
    prompts = build_suite(name, bpe, 3, seed=1, pad=4, haystack=HAYSTACK)
    for p in prompts:
        decoded = bpe.decode(p.input_ids)
        found = [i for i, s in enumerate(sentences) if s in decoded]
        assert len(found) == 4, decoded  # four of the user's sentences, consecutive modulo the text's end
        assert any(all((start + i) % 10 in found for i in range(4)) for start in found)
        assert "mill number" not in bpe.decode(build_suite(name, bpe, 1, seed=1, pad=4)[0].input_ids)
    assert prompts == build_suite(name, bpe, 3, seed=1, pad=4, haystack=HAYSTACK)


def test_a_haystack_is_refused_where_it_has_no_place_or_is_too_short(tok):
    with pytest.raises(SuiteError, match="induction has no haystack"):
        build_suite("induction", tok, 1, length=64, haystack=HAYSTACK)
    with pytest.raises(SuiteError, match="has 2 sentences; niah needs at least 8"):
        build_suite("niah", tok, 1, pad=2, haystack="One sentence. Two sentences.")


# ------------------------------------------------------------------------------- two needles, decoys, multi-key


def _count(ids, token) -> int:
    return sum(t == token for t in ids)


def test_niah_multi_plants_two_needles_and_asks_for_one_by_its_ordinal(tok):
    asked = set()
    for p in build_suite("niah_multi", tok, 12, seed=3, pad=6):
        text = _text(tok, p.input_ids)
        first, second = p.meta["needles"]
        assert text.startswith(f"the first secret word is {first}.")
        assert f"the second secret word is {second}." in text
        assert text.endswith(f"the {p.meta['asked']} secret word is")
        want = first if p.meta["asked"] == "first" else second
        assert _text(tok, p.answer_ids).strip() == want
        assert p.meta["decoys"] == ((second if want == first else first),)
        (decoy,) = p.meta["decoy_ids"]
        assert _count(p.input_ids, decoy[0]) == 1 and _count(p.input_ids, p.answer_ids[0]) == 1
        assert p.input_ids[p.answer_positions[0]] == p.answer_ids[0]
        asked.add(p.meta["asked"])
    assert asked == {"first", "second"}


def test_niah_decoy_plants_fake_decoy_and_real_before_the_haystack(tok):
    for p in build_suite("niah_decoy", tok, 8, seed=1, pad=6):
        text = _text(tok, p.input_ids)
        fake, decoy = p.meta["decoys"]
        assert text.startswith(
            f"the fake secret word is {fake}. the decoy secret word is {decoy}. "
            f"the real secret word is {p.meta['needle']}."
        )
        assert text.endswith("the real secret word is") and text.count("secret word is") == 4
        assert _text(tok, p.answer_ids).strip() == p.meta["needle"]
        assert len({fake, decoy, p.meta["needle"]}) == 3
        assert all(_count(p.input_ids, d[0]) == 1 for d in p.meta["decoy_ids"])


def test_ruler_multikey_holds_four_needles_and_asks_the_value_of_one_key(tok):
    for p in build_suite("ruler_multikey", tok, 6, seed=2, pad=8):
        text = tok.decode(list(p.input_ids), skip_special_tokens=True)
        text = re.sub(r" ([.,:?!-])", r"\1", text).replace("- ", "-")
        planted = dict(re.findall(r"special magic uuids for (\w+) is: ?([0-9a-f-]{36})", text))
        assert len(planted) == 4 and set(planted) == set(p.meta["keys"])
        asked = re.findall(r"magic uuids for (\w+) mentioned", text)
        assert asked == [p.meta["key"]] * 2
        assert planted[p.meta["key"]] == p.meta["value"]
        assert sorted(p.meta["decoys"]) == sorted(v for k, v in planted.items() if k != p.meta["key"])
        assert answer_correct(p, list(p.answer_ids), tok)


def test_decoy_hit_names_a_planted_decoy_and_nothing_else(tok):
    p = build_suite("niah_decoy", tok, 1, seed=4, pad=4)[0]
    fake, decoy = p.meta["decoy_ids"]
    assert decoy_hit(p, [fake[0]]) and decoy_hit(p, [decoy[0], 5])
    assert not decoy_hit(p, list(p.answer_ids)) and not decoy_hit(p, [])
    assert decoy_hit(build_suite("niah", tok, 1, pad=2)[0], [1]) is None
    multi = build_suite("ruler_multikey", tok, 1, seed=4, pad=4)[0]
    other = tok(" " + multi.meta["decoys"][1], add_special_tokens=False)["input_ids"]
    assert decoy_hit(multi, other, tok) and not decoy_hit(multi, list(multi.answer_ids), tok)
    with pytest.raises(SuiteError, match="decoy_hit"):
        decoy_hit(multi, other)


# ------------------------------------------------------------------------------------------ literary completion


def test_parse_passages_splits_on_blank_lines_and_reads_titles():
    assert parse_passages(PASSAGES) == (
        ("The River", " ".join(PASSAGES.split("\n\n")[0].splitlines()[2:])),
        ("passage 2", " ".join(PASSAGES.split("\n\n")[1].split())),
        ("Third", " ".join(PASSAGES.split("\n\n")[2].splitlines()[1:]).strip()),
    )
    assert parse_passages("# only a comment\n\n\n") == ()


def test_literary_is_padding_then_a_passage_cut_part_way_with_its_next_token_as_answer(tok):
    texts = dict(parse_passages(PASSAGES))
    lead = _bos(tok)
    seen = set()
    for p in build_suite("literary", tok, 9, seed=1, pad=20, passages=PASSAGES):
        ids = _ids(tok, texts[p.meta["title"]])
        cut = p.meta["cut"]
        assert len(ids) // 2 <= cut < len(ids)
        assert list(p.input_ids) == lead + list(p.input_ids[len(lead) : len(lead) + 20]) + ids[:cut]
        assert not set(p.input_ids[len(lead) : len(lead) + 20]) & set(ids)  # padding never names the text
        assert p.answer_ids == (ids[cut],) and p.answer_positions == () and answer_keys(p) == {}
        seen.add(p.meta["title"])
    assert seen == set(texts)  # 9 prompts cycle through the 3 passages


def test_literary_length_sets_the_padding(tok):
    for p in build_suite("literary", tok, 4, length=120, passages=PASSAGES):
        assert len(p.input_ids) == 120 and p.meta["pad"] == 120 - len(_bos(tok)) - p.meta["cut"]
    with pytest.raises(SuiteError, match="shorter than prompt 0's opening"):
        build_suite("literary", tok, 1, length=10, passages=PASSAGES)


def test_literary_defaults_to_the_bundled_openings_and_refuses_passages_elsewhere(bpe):
    bundled = bundled_passages()
    assert len(bundled) >= 60 and len({t for t, _ in bundled}) == len(bundled)
    assert all(len(body.split()) >= 40 and body.isascii() for _, body in bundled)
    titles = {p.meta["title"] for p in build_suite("literary", bpe, 30, pad=4)}
    assert len(titles) == 30 and titles <= {t for t, _ in bundled}
    with pytest.raises(SuiteError, match="niah opens no passage"):
        build_suite("niah", bpe, 1, pad=2, passages=PASSAGES)
    with pytest.raises(SuiteError, match="holds no passage"):
        build_suite("literary", bpe, 1, pad=2, passages="# nothing\n")
    with pytest.raises(SuiteError, match="no passage has 16 tokens"):
        build_suite("literary", bpe, 1, pad=2, passages="Too short.")


# ------------------------------------------------------------------------------------------ chat template

CHAT = (
    "{% for m in messages %}<s>[{{ m['role'] }}] {{ m['content'] }} [end]{% endfor %}"
    "{% if add_generation_prompt %} [assistant]{% endif %}"
)


@pytest.mark.parametrize("name", ["niah", "copying", "ruler_multikey", "literary"])
def test_chat_frames_every_prompt_as_a_user_message(word, name):
    plain = build_suite(name, word, 3, seed=1, **SMALL[name])
    word.chat_template = CHAT
    try:
        framed = build_suite(name, word, 3, seed=1, chat=True, **SMALL[name])
        before = _ids(word, "<s>[user] ")
        after = _ids(word, " [end] [assistant]")
    finally:
        word.chat_template = None
    lead = len(_bos(word))
    for p, f in zip(plain, framed):
        assert list(f.input_ids) == before + list(p.input_ids[lead:]) + after
        shift = len(before) - lead
        assert f.answer_positions == tuple(a + shift for a in p.answer_positions)
        keys = answer_keys(f)
        assert {q - shift: k - shift for q, k in keys.items() if q != len(f.input_ids) - 1} == {
            q: k for q, k in answer_keys(p).items() if q != len(p.input_ids) - 1
        }
    with pytest.raises(SuiteError, match="has no chat template"):
        build_suite("niah", word, 1, pad=2, chat=True)


def test_chat_keeps_inductions_answer_keys_on_the_repeat(word):
    word.chat_template = CHAT
    try:
        (p,) = build_suite("induction", word, 1, seed=2, length=40, chat=True)
    finally:
        word.chat_template = None
    after = _ids(word, " [end] [assistant]")
    assert list(p.input_ids[-len(after) :]) == after and p.meta["trail"] == len(after)
    keys = answer_keys(p)
    repeat = p.meta["repeat"]
    body = len(p.input_ids) - len(after)
    assert set(keys) == set(range(body - repeat, body)) | {len(p.input_ids) - 1}
    assert all(p.input_ids[k - 1] == p.input_ids[q] for q, k in keys.items() if q < body)


def test_a_chat_prompt_is_scored_on_the_words_of_its_answer_not_its_first_token(word):
    """A chat model says "the secret word is X": the planted word as a whole word among the first generated tokens
    counts, wherever it stands; a word that only contains it, or its absence, does not; plain prompts keep
    first-token scoring."""
    word.chat_template = CHAT
    try:
        (p,) = build_suite("niah", word, 1, seed=4, pad=2, chat=True)
    finally:
        word.chat_template = None
    (plain,) = build_suite("niah", word, 1, seed=4, pad=2)
    needle = word.decode([p.answer_ids[0]]).strip()
    said = _ids(word, f"the secret word is {needle} .")
    assert is_chat(p) and not is_chat(plain) and max_new_tokens("niah", chat=True) == 16
    assert answer_correct(p, said, word) and not answer_correct(plain, said, word)
    assert answer_correct(plain, list(plain.answer_ids), word)
    assert not answer_correct(p, _ids(word, "the secret word is gone ."), word)
    assert not answer_correct(p, _ids(word, f"the secret word is {needle}9 ."), word)
    with pytest.raises(SuiteError, match="scored on decoded text"):
        answer_correct(p, said)


def test_the_shipped_unseen_openings_make_a_literary_suite(bpe):
    from pathlib import Path

    text = (Path(__file__).parents[2] / "examples" / "literary" / "unseen.txt").read_text(encoding="utf-8")
    passages = parse_passages(text)
    assert len(passages) == 12 and all(70 <= len(body.split()) <= 120 for _, body in passages)
    titles = {p.meta["title"] for p in build_suite("literary", bpe, 12, pad=4, passages=text)}
    assert titles == {t for t, _ in passages}


def test_random_tokens_never_include_the_vocabulary_s_padding_placeholders():
    """A vocabulary padded to a round size (Qwen's GGUF [PAD151921], BERT's [unused0], Llama 3's reserved tokens)
    holds ids no model trained on: the suites that draw random tokens never draw them."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = [f"w{i}" for i in range(40)]
    padding = ["[PAD101]", "[unused0]", "<|reserved_special_token_3|>", "<extra_id_7>", "<unused12>"]
    vocab = {t: i for i, t in enumerate(["<unk>", *words, *padding])}
    inner = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    inner.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=inner, unk_token="<unk>")
    banned = {vocab[t] for t in padding}
    for name in ("induction", "mqar"):
        for prompt in build_suite(name, tok, 20, seed=3, length=64):
            assert not banned & set(prompt.input_ids), (name, prompt.input_ids)
