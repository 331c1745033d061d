// ns-3 peer of `cellperf simulate` for bench/simulate.py: seed 001's topology with an RR-like
// per-flow link. N fixed hosts -> PDSN -> BS (100 Mb/s, 10 ms per hop) -> one point-to-point
// link per mobile host whose BS-side rate follows a two-state Markov chain (Good/Bad, mean
// sojourn 1/switch s), i.e. each user's fair share of a round-robin cell when all are busy.
// One bulk TCP NewReno flow per user (classic recovery, no SACK, no timestamps, ACK per
// segment, min RTO 1 s, IW 1, ssthresh 16 segments), a drop-tail queue of Q packets at the BS.
// Prints one line per flow: "flow U goodput_bps X" (payload bits delivered / duration).
#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <iostream>

using namespace ns3;

static void
Toggle(Ptr<PointToPointNetDevice> dev, bool good, double good_bps, double bad_bps,
       Ptr<ExponentialRandomVariable> sojourn)
{
    dev->SetDataRate(DataRate(static_cast<uint64_t>(good ? good_bps : bad_bps)));
    Simulator::Schedule(Seconds(sojourn->GetValue()), &Toggle, dev, !good, good_bps, bad_bps, sojourn);
}

int
main(int argc, char* argv[])
{
    uint32_t users = 3;
    double duration = 1000;
    double good = 1e6 / 3, bad = 1e5 / 3, sw = 1.0;
    uint32_t queue = 10, packet = 250, seed = 1;
    CommandLine cmd;
    cmd.AddValue("users", "users", users);
    cmd.AddValue("duration", "seconds", duration);
    cmd.AddValue("good", "Good rate, bit/s", good);
    cmd.AddValue("bad", "Bad rate, bit/s", bad);
    cmd.AddValue("switch", "transitions per second out of each state", sw);
    cmd.AddValue("queue", "BS queue, packets", queue);
    cmd.AddValue("packet", "IP packet bytes", packet);
    cmd.AddValue("seed", "run number", seed);
    cmd.Parse(argc, argv);
    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(seed);

    uint32_t segment = packet - 40;
    Config::SetDefault("ns3::TcpL4Protocol::SocketType", StringValue("ns3::TcpNewReno"));
    Config::SetDefault("ns3::TcpL4Protocol::RecoveryType", TypeIdValue(TcpClassicRecovery::GetTypeId()));
    Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(false));
    Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(false));
    Config::SetDefault("ns3::TcpSocketBase::WindowScaling", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(Seconds(1)));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(segment));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(1));
    Config::SetDefault("ns3::TcpSocket::InitialSlowStartThreshold", UintegerValue(16 * segment));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(1));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(1 << 24));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(1 << 24));

    NodeContainer fh, mh, pdsn, bs;
    fh.Create(users);
    mh.Create(users);
    pdsn.Create(1);
    bs.Create(1);
    InternetStackHelper stack;
    stack.InstallAll();

    PointToPointHelper wired;
    wired.SetDeviceAttribute("DataRate", StringValue("100Mbps"));
    wired.SetChannelAttribute("Delay", StringValue("10ms"));
    Ipv4AddressHelper addr;
    addr.SetBase("10.1.0.0", "255.255.255.0");
    for (uint32_t u = 0; u < users; u++)
    {
        addr.Assign(wired.Install(fh.Get(u), pdsn.Get(0)));
        addr.NewNetwork();
    }
    addr.Assign(wired.Install(pdsn.Get(0), bs.Get(0)));
    addr.NewNetwork();

    PointToPointHelper air;
    air.SetChannelAttribute("Delay", StringValue("0ms"));
    air.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue(std::to_string(queue) + "p"));
    TrafficControlHelper tc;
    std::vector<Ipv4Address> mh_addr;
    for (uint32_t u = 0; u < users; u++)
    {
        NetDeviceContainer d = air.Install(bs.Get(0), mh.Get(u));
        // The BS side follows the channel; ACKs go up at the wired rate (not a bottleneck).
        auto down = DynamicCast<PointToPointNetDevice>(d.Get(0));
        DynamicCast<PointToPointNetDevice>(d.Get(1))->SetDataRate(DataRate("100Mbps"));
        Ipv4InterfaceContainer i = addr.Assign(d);
        // The device's drop-tail queue is the base station's buffer: no qdisc in front of it.
        tc.Uninstall(d);
        mh_addr.push_back(i.GetAddress(1));
        addr.NewNetwork();
        auto sojourn = CreateObject<ExponentialRandomVariable>();
        sojourn->SetAttribute("Mean", DoubleValue(1.0 / sw));
        auto start = CreateObject<UniformRandomVariable>();
        Toggle(down, start->GetValue() < 0.5, good, bad, sojourn);
    }
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    std::vector<Ptr<PacketSink>> sinks;
    for (uint32_t u = 0; u < users; u++)
    {
        uint16_t port = 5000 + u;
        PacketSinkHelper sink("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), port));
        ApplicationContainer s = sink.Install(mh.Get(u));
        s.Start(Seconds(0));
        sinks.push_back(DynamicCast<PacketSink>(s.Get(0)));
        BulkSendHelper src("ns3::TcpSocketFactory", InetSocketAddress(mh_addr[u], port));
        src.SetAttribute("SendSize", UintegerValue(segment));
        src.Install(fh.Get(u)).Start(Seconds(0));
    }
    Simulator::Stop(Seconds(duration));
    Simulator::Run();
    for (uint32_t u = 0; u < users; u++)
    {
        std::cout << "flow " << u << " goodput_bps " << sinks[u]->GetTotalRx() * 8.0 / duration << std::endl;
    }
    Simulator::Destroy();
    return 0;
}
