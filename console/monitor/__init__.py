"""The monitor (`manage.py monitor`): ZooKeeper watches (watcher), 1 s samples of
offsets and group offsets (sampler), Burrow's lag rules (burrow), deltas to channel
groups and history to Redis (run)."""
