"""Reference solution of the CS336-style assignment on LLM training primitives."""
