"""Sentence embeddings: the encoder (torch or ONNX Runtime), the build's embedding store (each text
encoded once per encoder) and exact cosine similarity by blocks."""
