//! A server's memory per test follows the packets that arrived, not the sequence numbers a
//! client writes: one authenticated client, within every cap, asks for the largest UDP
//! test and sends the highest number it allows (issue 18 item 3: this grew a server from
//! 15 MB to 1.33 GB). Its own test binary, so the counting allocator sees this test alone.

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cellperf_agent::limits::MAX_PACKETS;
use cellperf_agent::server::{Server, ServerConfig};
use cellperf_agent::wire::*;
use cellperf_agent::{auth, udp};
use cellperf_capture::probe_header::write_cellperf;

/// The system allocator, counting bytes in use and their peak.
struct Counting;
static IN_USE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            let now = IN_USE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        IN_USE.fetch_sub(l.size(), Ordering::Relaxed);
        System.dealloc(p, l)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn handshake(addr: SocketAddr, token: &[u8]) -> (TcpStream, FrameReader) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut rd = FrameReader::new(MAX_SERVER_FRAME);
    let client_nonce = Bytes32([3; 32]);
    send_message(
        &mut c,
        &Message::Hello {
            version: PLAIN_VERSION,
            client_nonce,
        },
    )
    .unwrap();
    let Message::Challenge { server_nonce } =
        rd.read_message(&mut c, Duration::from_secs(5)).unwrap()
    else {
        panic!("no challenge")
    };
    send_message(
        &mut c,
        &Message::Auth {
            mac: auth::client_proof(token, &server_nonce, &client_nonce),
        },
    )
    .unwrap();
    assert!(matches!(
        rd.read_message(&mut c, Duration::from_secs(5)).unwrap(),
        Message::AuthOk { .. }
    ));
    (c, rd)
}

#[test]
fn far_sequence_numbers_do_not_grow_the_server() {
    let s = Server::bind(ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        token: b"k".to_vec(),
        max_rate_bps: 1e9,
        max_duration_s: 1000.0,
        max_tests: 4,
        log_dir: None,
    })
    .unwrap();
    let addr = s.local_addr().unwrap();
    let stop = s.stop_flag();
    let serving = std::thread::spawn(move || s.serve(&mut || true).unwrap());

    let (mut c, mut rd) = handshake(addr, b"k");
    // 64 Mi packets of 20 B every 8 µs: 20 Mbit/s for 537 s, within the caps above.
    let spec = UdpSpec {
        direction: Direction::Up,
        payload_bytes: 20,
        interval_ns: 8_000,
        count: MAX_PACKETS,
        drain_ms: 0,
        trains: None,
    };
    send_message(&mut c, &Message::StartUdp { spec }).unwrap();
    let Message::Accepted { data_port, cookie } =
        rd.read_message(&mut c, Duration::from_secs(5)).unwrap()
    else {
        panic!("not accepted")
    };
    let data = UdpSocket::bind("127.0.0.1:0").unwrap();
    data.connect((addr.ip(), data_port)).unwrap();
    let before = IN_USE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    data.send(&udp::hello_datagram(&cookie)).unwrap();
    assert!(matches!(
        rd.read_message(&mut c, Duration::from_secs(5)).unwrap(),
        Message::Ready {}
    ));
    let mut p = [0u8; 20];
    for seq in [MAX_PACKETS - 1, 0, MAX_PACKETS / 2, MAX_PACKETS - 1] {
        write_cellperf(&mut p, seq, 1_000, false);
        data.send(&p).unwrap();
    }
    // The server's progress report shows the three distinct packets arrived.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match rd.read_message(&mut c, Duration::from_secs(5)).unwrap() {
            Message::Progress {
                packets_received: 3,
                ..
            } => break,
            Message::Progress { .. } => assert!(
                std::time::Instant::now() < deadline,
                "the server never counted 3 packets"
            ),
            other => panic!("unexpected {other:?}"),
        }
    }
    send_message(
        &mut c,
        &Message::Abort {
            reason: "done".into(),
        },
    )
    .unwrap();
    let mut up = Vec::new();
    let report = loop {
        match rd.read(&mut c, Duration::from_secs(5)).unwrap() {
            Frame::Records {
                stream: StreamDir::Up,
                records,
            } => up.extend(records),
            Frame::Records { .. } | Frame::Message(Message::Progress { .. }) => {}
            Frame::Message(Message::Report { report }) => break report,
            Frame::Message(other) => panic!("unexpected {other:?}"),
        }
    };
    let grown = PEAK.load(Ordering::Relaxed).saturating_sub(before);
    stop.store(true, Ordering::Relaxed);
    serving.join().unwrap();
    assert_eq!((report.packets_received, report.duplicates), (3, 1));
    assert_eq!(
        up.iter().map(|r| r.seq).collect::<Vec<_>>(),
        [0, MAX_PACKETS / 2, MAX_PACKETS - 1]
    );
    // The receive buffer (256 KiB) and a few frames; a table up to 2^26 would be 1.3 GB.
    assert!(
        grown < 8 << 20,
        "the server grew by {grown} B for 3 packets"
    );
}
