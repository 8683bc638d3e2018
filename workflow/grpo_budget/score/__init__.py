"""Score stage: the base model's samples of every pool item, graded; adaptive rounds; agreement; verification."""
