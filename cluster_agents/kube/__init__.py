"""Kubernetes plumbing shared by the agent's backend and the scheduler extender.

Both processes watch the same cluster and must read it the same way, so what they share lives
here and neither imports the other:

- `api`: raw-JSON API calls timed into metrics, `KubeAPIError`, timestamps;
- `metrics`: the list+watch and API-call metrics (`suanpan_agent_kube_*`);
- `watch`: list+watch of one resource into a store, resumed by resourceVersion, a full list
  after 410 Gone;
- `pods`: what a pod asks for (`Demand`) and the facts occupancy needs (`PodInfo`);
- `occupancy`: a node's accelerator inventory and the one occupancy function, which the agent
  reports nodes to the hub with and the extender filters, scores and binds with.
"""
