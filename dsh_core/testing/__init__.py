"""The test kit that ships with dsh: a scripted model and pytest fixtures for harness tests."""
