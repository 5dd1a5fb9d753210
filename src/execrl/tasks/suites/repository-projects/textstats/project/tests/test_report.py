from textstats.report import summary


def test_summary():
    text = "The dog barked. The Dog ran - fast... Why? The end"
    assert summary(text) == "top: the=3, dog=2; words/sentence: 2.5"
