"""Korean."""
