"""Security and bad input (issue 11)."""
