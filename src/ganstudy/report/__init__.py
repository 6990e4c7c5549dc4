"""Reporting stage: tables and figures from the aggregated scores."""
