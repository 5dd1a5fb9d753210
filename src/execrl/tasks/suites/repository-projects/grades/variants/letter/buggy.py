def letter(avg: float, scale: tuple = SCALE) -> str:
    for threshold, grade in scale:
        if avg > threshold:
            return grade
    return "F"
