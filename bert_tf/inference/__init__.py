"""Inference on a trained model: features, sentence embeddings, Beam over a corpus."""
