"""Number heads: map final hidden states to exact numbers (digits) or values, with their losses."""
