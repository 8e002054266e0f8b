"""Helpers the test suites share (test databases, test data, scripted providers, servers, the
console's browser rig, the chart and image builders); no test module imports another test
module, they all import from here. A fixture defined here is registered by the conftest.py
of the directory that uses it. What a subprocess replica must import instead lives in the
test-support distribution (tests/support)."""
