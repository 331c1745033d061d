import pytest

from tests.voice.voice_streams import build_stream


@pytest.fixture
def make_stream():
    """Builder of synthetic voice streams in the udp_packets schema (see voice_streams.py)."""
    return build_stream
