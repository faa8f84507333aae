"""A model put to work: activations, sentence embeddings, any export over a corpus on Beam."""
