"""Builds of the real parts from their Go modules, and the machine's set-up."""
