"""The differential method: each part of the pipeline measured alone, and the capacity check."""
