"""Wire types shared by the hub and the cluster agents: the agent protocol and pod annotations."""
