"""The agent installed in each member cluster: inventory up, work down, status up."""
