"""trustlab: trustworthy machine learning with one audit command."""
