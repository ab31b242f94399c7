import pytest

from attention_conformance.run import calls


@pytest.fixture
def fresh_oracle(tmp_path, monkeypatch):
    """An empty oracle cache and no outputs kept from another test: each verdict computed here."""
    monkeypatch.setenv("ATTENTION_CONFORMANCE_CACHE", str(tmp_path / "cache"))
    calls.forget()
    yield
    calls.forget()
