//! Reading packet captures for cellperf.
//!
//! The data path is `reader` (pcap / pcapng records out of a memory-mapped file) →
//! `decode` (link layer → IPv4/IPv6 → TCP/UDP, into a small [`Packet`] value).
//! Nothing here panics on any input: a damaged file ends the record stream with a
//! [`CaptureWarning`] that names the byte offset, and a packet that cannot be decoded
//! is reported as such, never as an index out of bounds.

pub mod decode;
pub mod linktype;
pub mod probe_header;
pub mod reader;

pub use decode::{
    addr_from_str, addr_to_string, decode_frame, Addr, Fragmentation, IpInfo, Packet, SackBlocks, Skip, TcpInfo, TcpOptions, Transport, UdpInfo,
};
pub use linktype::LinkType;
pub use reader::{Capture, CaptureError, CaptureFormat, CaptureWarning, Frame, Frames};
