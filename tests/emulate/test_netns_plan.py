"""Names and addresses the emulator plans for its users (no root needed)."""

import ipaddress

from cellperf.emulate import netns


def test_blocks_taken_in_turn_with_ipv6_following_ipv4(tmp_path, monkeypatch):
    monkeypatch.setattr(netns, "NEXT_BLOCK_PATH", str(tmp_path / "next-block"))
    used = {ipaddress.ip_network("10.231.1.0/24")}
    monkeypatch.setattr(netns, "_used_subnets", lambda: used)
    first = netns.plan_users(2)
    # Block 0 is free; the next run skips block 1 (in use) and takes 2, then 3: a run never gets
    # the block the previous run just released.
    assert [u.cn_addr for u in first] == ["10.231.0.1", "10.231.0.5"]
    assert [(u.cn_addr6, u.mn_addr6) for u in first] == [("fd00:cbf::1", "fd00:cbf::2"), ("fd00:cbf:0:1::1", "fd00:cbf:0:1::2")]
    assert netns.plan_users(1)[0].mn_addr == "10.231.2.2"
    (third,) = netns.plan_users(1)
    assert (third.mn_addr, third.mn_addr6) == ("10.231.3.2", "fd00:cbf:3::2")
    # After the last block, the first free one again.
    (tmp_path / "next-block").write_text("255\n")
    assert [u.cn_addr for u in netns.plan_users(1) + netns.plan_users(1)] == ["10.231.255.1", "10.231.0.1"]
    assert netns.plan_users(1)[0].cn_addr6 == "fd00:cbf:2::1"  # block 1 still in use
