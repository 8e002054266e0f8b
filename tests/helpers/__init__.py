"""Helpers the test suites share (test data, scripted providers, servers); no test module
imports another test module, they all import from here. Fixtures live in conftest.py."""
