from textstats.stats import top_words, word_counts, words_per_sentence


def test_word_counts():
    assert word_counts("a b a") == {"a": 2, "b": 1}


def test_top_words():
    assert top_words("b a b c a b", 2) == [("b", 3), ("a", 2)]


def test_words_per_sentence():
    assert words_per_sentence("Hi there. Bye!") == 1.5
