"""Cluster backends under the agent: a real Kubernetes cluster, or a simulated one."""
