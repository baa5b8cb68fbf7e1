"""The default plugins of the root distribution: each a service a configuration can replace."""
