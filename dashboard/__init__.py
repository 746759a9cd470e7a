"""The web dashboard: server-rendered pages over the pool tree, workflows and the cluster."""
