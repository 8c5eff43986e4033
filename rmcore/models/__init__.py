"""Models: device and precision, text layout, loading and the reward forward passes (packed
encoder, shared prompt, prefix scoring, batching), and the tiny local models."""
