"""Generation: model backends (transformers, vLLM), prompts, graders, and sampling-and-grading of item tables."""
