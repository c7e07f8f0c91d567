"""spatialhub: tools for spatial ML pipelines."""
