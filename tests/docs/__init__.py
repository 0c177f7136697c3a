"""The manual (docs/): agrees with the code, and quotes what the tests print."""
