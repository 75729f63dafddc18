"""Deployment tooling: Helm charts, manifests and local real-cluster tooling."""
