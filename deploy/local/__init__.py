"""Local multi-cluster Kubernetes test environment (real control planes, kwok nodes)."""
