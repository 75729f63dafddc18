"""End-to-end tests against real local Kubernetes control planes."""
