def curve(scores: list[int], points: int) -> list[int]:
    return [s + points for s in scores]
