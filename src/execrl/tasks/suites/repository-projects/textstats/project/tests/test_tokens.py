from textstats.tokens import sentences, words


def test_words():
    assert words("the cat sat on the mat") == ["the", "cat", "sat", "on", "the", "mat"]
    assert words("don't stop") == ["don't", "stop"]


def test_sentences():
    assert sentences("One. Two!") == ["One.", "Two!"]
