"""What several test modules share: jobs, fixtures and checks that were once defined in
one test module and imported from it by others. A test module imports from here, never
from another test module (pytest rewrites the asserts here too: tests/conftest.py)."""
