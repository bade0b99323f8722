"""The train, evaluate and predict loops: sessions, hooks in their order, and a clean stop on a signal."""
