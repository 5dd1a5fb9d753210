def curve(scores: list[int], points: int) -> list[int]:
    for i, s in enumerate(scores):
        scores[i] = min(100, s + points)
    return scores
