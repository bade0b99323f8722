"""Elastic data sharding: the shard book (a pure state machine) and, later, its service."""
