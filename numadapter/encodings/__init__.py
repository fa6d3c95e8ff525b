"""Number encodings: features computed from exact numbers and added to the [NUM]/[AGG] token embeddings."""
