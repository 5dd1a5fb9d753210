SCALE = ((90, "A"), (80, "B"), (70, "C"), (60, "D"))


def average(scores: list[int]) -> float:
    """Mean of the scores; raises ValueError for an empty list."""
    if not scores:
        raise ValueError("no scores")
    return sum(scores) / len(scores)


def letter(avg: float, scale: tuple = SCALE) -> str:
    """The letter of the first (threshold, letter) pair with avg >= threshold, else 'F'."""
    for threshold, grade in scale:
        if avg >= threshold:
            return grade
    return "F"


def curve(scores: list[int], points: int) -> list[int]:
    """A new list with `points` added to each score, capped at 100."""
    return [min(100, s + points) for s in scores]
