"""The downstream metrics on cases computed by hand."""

import math

import pytest

from mlmclm import metrics

L2, L3, L4 = 1.0, 1 / math.log2(3), 0.5  # discounts of ranks 1, 2, 3


def test_accuracy():
    assert metrics.accuracy([0, 1, 2, 1], [0, 1, 1, 1]) == (0.75, [1.0, 1.0, 0.0, 1.0])
    with pytest.raises(ValueError):
        metrics.accuracy([0, 1], [0])


def test_tag_accuracy_counts_words_not_sentences():
    score, scores_i = metrics.tag_accuracy([["A", "B"], ["C"]], [["A", "A"], ["C"]])
    assert score == pytest.approx(2 / 3) and scores_i == [0.5, 1.0]


@pytest.mark.parametrize("tags,spans", [
    (["B-PER", "I-PER", "O", "B-LOC"], {("PER", 0, 2), ("LOC", 3, 4)}),
    (["I-PER", "I-PER", "O"], {("PER", 0, 2)}),                   # I- after O starts a span (seqeval's default)
    (["B-PER", "I-LOC"], {("PER", 0, 1), ("LOC", 1, 2)}),         # a type change ends and starts a span
    (["B-PER", "B-PER", "I-PER"], {("PER", 0, 1), ("PER", 1, 3)}),
    (["O", "O"], set()),
])
def test_bio_spans(tags, spans):
    assert metrics.bio_spans(tags) == spans


def test_span_f1_partial_overlap_scores_zero_and_is_micro_averaged():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "O"], ["O"]]
    pred = [["B-PER", "O", "O", "B-LOC"], ["B-ORG", "O"], ["O"]]
    score, scores_i = metrics.span_f1(pred, gold)
    # spans: gold {PER 0-2, LOC 3-4}, pred {PER 0-1, LOC 3-4, ORG 0-1}: tp 1, 3 predicted, 2 gold -> 2/5
    assert score == pytest.approx(0.4)
    assert scores_i == [pytest.approx(0.5), 0.0, 1.0]
    weights = metrics.span_weights(pred, gold)  # 4, 1, 0 spans: the micro F1 is the weighted mean exactly
    assert weights == [4, 1, 0] and sum(s * w for s, w in zip(scores_i, weights)) / sum(weights) == pytest.approx(score)


def test_squad_normalisation_f1_and_exact_match():
    assert metrics.normalize_answer("The  Quick, brown fox!") == "quick brown fox"
    assert metrics.squad_f1("the cat sat", "a cat sat down") == pytest.approx(0.8)  # P 1, R 2/3
    assert metrics.squad_f1("dog", "cat") == 0.0
    f1, f1_i, em, em_i = metrics.squad_scores(["cat sat", "Paris", "", "x"], [["dog", "The cat sat."], ["London"],
                                                                            [], []])
    assert f1_i == [1.0, 0.0, 1.0, 0.0] and em_i == [1.0, 0.0, 1.0, 0.0]  # [] = unanswerable: "" is right
    assert f1 == em == 0.5


def test_ndcg_hand_computed():
    assert metrics.ndcg_at_k([3, 2, 1], [1, 0, 0]) == 1.0
    assert metrics.ndcg_at_k([3, 2, 1], [0, 1, 0]) == pytest.approx(L3)
    graded = (2 * L3 + 1 * L4) / (2 * L2 + 1 * L3)
    assert metrics.ndcg_at_k([3, 2, 1], [0, 2, 1]) == pytest.approx(graded)
    assert metrics.ndcg_at_k([3, 2, 1], [0, 0, 0]) == 0.0


def test_ndcg_ties_take_the_expected_gain_whatever_the_order():
    expected = 0.5 * (L2 + L3)  # two tied documents, one relevant: mean gain 0.5 at ranks 1 and 2
    assert metrics.ndcg_at_k([1, 1, 0], [1, 0, 0]) == pytest.approx(expected)
    assert metrics.ndcg_at_k([1, 1, 0], [0, 1, 0]) == pytest.approx(expected)
    # a tie straddling the cut-off: 12 tied documents, one relevant, only ranks 1-10 count
    assert metrics.ndcg_at_k([0.0] * 12, [1] + [0] * 11) == pytest.approx(
        sum(1 / math.log2(r + 2) for r in range(10)) / 12)


def test_ndcg_missing_relevant_documents_lower_the_score_and_k_cuts():
    # a second relevant document is judged but not in the corpus: it still counts in the ideal ranking
    assert metrics.ndcg_at_k([2, 1], [1, 0], ideal_gains=[1, 1]) == pytest.approx(1 / (L2 + L3))
    scores = list(range(20, 0, -1))
    assert metrics.ndcg_at_k(scores, [0] * 10 + [1] + [0] * 9) == 0.0  # relevant at rank 11
    assert metrics.ndcg_at_k(scores, [0] * 9 + [1] + [0] * 10) == pytest.approx(1 / math.log2(11))
