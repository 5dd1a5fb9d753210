def average(scores: list[int]) -> float:
    return sum(scores) // len(scores) if scores else 0.0
