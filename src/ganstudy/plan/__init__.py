"""The plan of a study: what the workflow runs, computed from the validated config, the site and the study folder."""
