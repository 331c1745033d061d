//! pcap files of what crossed one side of the emulated link.
//!
//! Classic pcap, little-endian, nanosecond time stamps (magic 0xa1b23c4d), link type
//! LINKTYPE_RAW (101: each record is a bare IPv4 or IPv6 packet), full packets.
use crate::error::LinkError;
use std::fs::File;
use std::io::{BufWriter, Write};

pub const PCAP_MAGIC_NANOS: u32 = 0xa1b2_3c4d;
pub const LINKTYPE_RAW: u32 = 101;
pub const SNAPLEN: u32 = 262_144;

pub struct PcapWriter {
    out: BufWriter<File>,
    path: String,
}

impl PcapWriter {
    pub fn create(path: &str) -> Result<Self, LinkError> {
        let file = File::create(path)
            .map_err(|e| LinkError::file(path, format!("cannot create the capture ({e})")))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let mut header = Vec::with_capacity(24);
        header.extend_from_slice(&PCAP_MAGIC_NANOS.to_le_bytes());
        header.extend_from_slice(&2u16.to_le_bytes());
        header.extend_from_slice(&4u16.to_le_bytes());
        header.extend_from_slice(&0i32.to_le_bytes()); // thiszone
        header.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        header.extend_from_slice(&SNAPLEN.to_le_bytes());
        header.extend_from_slice(&LINKTYPE_RAW.to_le_bytes());
        out.write_all(&header)
            .map_err(|e| LinkError::file(path, format!("cannot write ({e})")))?;
        Ok(PcapWriter {
            out,
            path: path.to_string(),
        })
    }

    /// Appends one packet seen at `epoch_ns` (nanoseconds since the Unix epoch).
    pub fn write(&mut self, epoch_ns: u64, packet: &[u8]) -> Result<(), LinkError> {
        let len = packet.len().min(SNAPLEN as usize) as u32;
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&((epoch_ns / 1_000_000_000) as u32).to_le_bytes());
        rec[4..8].copy_from_slice(&((epoch_ns % 1_000_000_000) as u32).to_le_bytes());
        rec[8..12].copy_from_slice(&len.to_le_bytes());
        rec[12..16].copy_from_slice(&(packet.len() as u32).to_le_bytes());
        self.out
            .write_all(&rec)
            .and_then(|_| self.out.write_all(&packet[..len as usize]))
            .map_err(|e| LinkError::file(&self.path, format!("cannot write ({e})")))
    }

    pub fn flush(&mut self) -> Result<(), LinkError> {
        self.out
            .flush()
            .map_err(|e| LinkError::file(&self.path, format!("cannot write ({e})")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_record_layout() {
        let path =
            std::env::temp_dir().join(format!("cellperf-link-pcap-{}.pcap", std::process::id()));
        let p = path.to_str().unwrap();
        let mut w = PcapWriter::create(p).unwrap();
        w.write(1_700_000_000_123_456_789, &[0x45, 0, 0, 20])
            .unwrap();
        w.flush().unwrap();
        let bytes = std::fs::read(p).unwrap();
        std::fs::remove_file(p).unwrap();
        assert_eq!(&bytes[0..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        assert_eq!(u32::from_le_bytes(bytes[20..24].try_into().unwrap()), 101);
        assert_eq!(
            u32::from_le_bytes(bytes[24..28].try_into().unwrap()),
            1_700_000_000
        );
        assert_eq!(
            u32::from_le_bytes(bytes[28..32].try_into().unwrap()),
            123_456_789
        );
        assert_eq!(u32::from_le_bytes(bytes[32..36].try_into().unwrap()), 4);
        assert_eq!(&bytes[40..44], &[0x45, 0, 0, 20]);
        assert_eq!(bytes.len(), 44);
    }
}
