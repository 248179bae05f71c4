pytest_plugins = ["tests.apiserver.fixtures"]
