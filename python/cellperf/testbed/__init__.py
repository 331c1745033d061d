"""Testbeds that carry real kernel traffic between a mobile node and a correspondent node."""
