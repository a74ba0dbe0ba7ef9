"""HTML report builder."""
