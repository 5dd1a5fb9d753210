from grades.scores import SCALE, average, curve, letter


def test_average():
    assert average([90, 80]) == 85


def test_letter():
    assert letter(91, SCALE) == "A"
    assert letter(80, SCALE) == "B"
    assert letter(59.5, SCALE) == "F"
    assert letter(75, ((70, "pass"),)) == "pass"


def test_curve():
    assert curve([50, 98], 5) == [55, 100]
