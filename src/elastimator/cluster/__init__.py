"""Clusters: the local multi-process launcher, its scaling policy, and Kubernetes TFJob manifests."""
