"""The study config: its schema and defaults, its loading and validation, the sweeps it expands into
set-ups, and the typed settings the stages read."""
