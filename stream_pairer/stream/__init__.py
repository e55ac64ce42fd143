"""stream layer."""
