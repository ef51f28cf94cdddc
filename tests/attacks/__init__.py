"""Attack corpus: one file per class of hostile input (issue C)."""
