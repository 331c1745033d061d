//! Hostile peers on loopback: a server that lies to the probe, and (below) clients that
//! try to lock the server's door.

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::time::Duration;

use cellperf_agent::plan::{plan, Options};
use cellperf_agent::wire::*;
use cellperf_agent::{auth, probe};

/// A fake server that authenticates properly, then answers a UDP test with `records`.
fn lying_server(token: &'static [u8], records: Vec<Record>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut rd = FrameReader::new(MAX_CLIENT_FRAME);
        let t = Duration::from_secs(5);
        let Message::Hello { client_nonce, .. } = rd.read_message(&mut c, t).unwrap() else { panic!("no hello") };
        let server_nonce = Bytes32([5; 32]);
        send_message(&mut c, &Message::Challenge { server_nonce }).unwrap();
        let Message::Auth { .. } = rd.read_message(&mut c, t).unwrap() else { panic!("no auth") };
        send_message(&mut c, &Message::AuthOk { mac: auth::server_proof(token, &server_nonce, &client_nonce) }).unwrap();
        let data = UdpSocket::bind("127.0.0.1:0").unwrap();
        loop {
            match rd.read_message(&mut c, t) {
                Ok(Message::TimeRequest { t1_ns }) => send_message(&mut c, &Message::TimeReply { t1_ns, t2_ns: t1_ns, t3_ns: t1_ns }).unwrap(),
                Ok(Message::StartUdp { .. }) => {
                    let port = data.local_addr().unwrap().port();
                    send_message(&mut c, &Message::Accepted { data_port: port, cookie: Cookie([1; 16]) }).unwrap();
                    send_message(&mut c, &Message::Ready {}).unwrap();
                }
                Ok(Message::SendDone { .. }) => {
                    send_records(&mut c, StreamDir::Up, &records).unwrap();
                    send_records(&mut c, StreamDir::Down, &[]).unwrap();
                    let report = ServerReport { packets_received: records.len() as u64, ..Default::default() };
                    send_message(&mut c, &Message::Report { report }).unwrap();
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
    });
    addr
}

/// A record numbered 2^62 made the probe size a table to it ("capacity overflow" panic);
/// now it is one line naming the number, and the run's own sends are kept.
#[test]
fn a_record_with_a_far_sequence_number_is_a_protocol_error_not_a_panic() {
    let far = Record { seq: 1 << 62, send_ns: Some(1), recv_ns: Some(2), bytes: 100 };
    let addr = lying_server(b"t", vec![Record { seq: 0, ..far }, far]);
    let o = Options { payload: Some(100), rate_bps: Some(80_000.0), duration_s: Some(0.1), timeout_s: Some(0.1), ..Default::default() };
    let r = probe::run(&addr.to_string(), b"t", &plan("udp-cbr", &o).unwrap(), &mut |_| true);
    let e = r.error.expect("an error");
    assert!(e.contains("sequence number 4611686018427387904 outside the test's 10 packets"), "{e}");
    assert_eq!(r.document["send_lateness_us"]["samples"], 10, "{}", r.document);
}

