//! Mutual challenge–response on a shared token (HMAC-SHA256), so the token never crosses
//! the network: each side sends a fresh random nonce, the client proves it knows the token
//! with a MAC over both nonces, and the server answers with a MAC of its own (a different
//! label, so one cannot be replayed as the other) before the client trusts it.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::wire::Bytes32;

type HmacSha256 = Hmac<Sha256>;

const CLIENT_LABEL: &[u8] = b"cellperf-agent v1 client proof";
const SERVER_LABEL: &[u8] = b"cellperf-agent v1 server proof";
const RESUME_LABEL: &[u8] = b"cellperf-agent v3 resume proof";

fn mac(token: &[u8], label: &[u8], first: &Bytes32, second: &Bytes32) -> HmacSha256 {
    // HMAC accepts keys of any length; `new_from_slice` cannot fail for it.
    let mut m = HmacSha256::new_from_slice(token).expect("HMAC takes any key length");
    m.update(label);
    m.update(&first.0);
    m.update(&second.0);
    m
}

fn to_bytes(m: HmacSha256) -> Bytes32 {
    Bytes32(m.finalize().into_bytes().into())
}

/// The client's proof over (server nonce, client nonce).
pub fn client_proof(token: &[u8], server_nonce: &Bytes32, client_nonce: &Bytes32) -> Bytes32 {
    to_bytes(mac(token, CLIENT_LABEL, server_nonce, client_nonce))
}

/// The server's proof over (client nonce, server nonce).
pub fn server_proof(token: &[u8], server_nonce: &Bytes32, client_nonce: &Bytes32) -> Bytes32 {
    to_bytes(mac(token, SERVER_LABEL, client_nonce, server_nonce))
}

/// Constant-time check of a proof made with `label` over (`first`, `second`).
fn verify(token: &[u8], label: &[u8], first: &Bytes32, second: &Bytes32, proof: &Bytes32) -> bool {
    mac(token, label, first, second)
        .verify_slice(&proof.0)
        .is_ok()
}

/// Constant-time check of the client's proof.
pub fn verify_client(
    token: &[u8],
    server_nonce: &Bytes32,
    client_nonce: &Bytes32,
    proof: &Bytes32,
) -> bool {
    verify(token, CLIENT_LABEL, server_nonce, client_nonce, proof)
}

/// The client's proof in a `resume` over (ticket, client nonce): the ticket stands in for a
/// server nonce the server gave in advance (its own label: not usable as an `auth` proof).
pub fn resume_proof(token: &[u8], ticket: &Bytes32, client_nonce: &Bytes32) -> Bytes32 {
    to_bytes(mac(token, RESUME_LABEL, ticket, client_nonce))
}

/// Constant-time check of a `resume` proof.
pub fn verify_resume(
    token: &[u8],
    ticket: &Bytes32,
    client_nonce: &Bytes32,
    proof: &Bytes32,
) -> bool {
    verify(token, RESUME_LABEL, ticket, client_nonce, proof)
}

/// Constant-time check of the server's proof.
pub fn verify_server(
    token: &[u8],
    server_nonce: &Bytes32,
    client_nonce: &Bytes32,
    proof: &Bytes32,
) -> bool {
    verify(token, SERVER_LABEL, client_nonce, server_nonce, proof)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_verify_only_with_the_same_token_and_are_not_interchangeable() {
        let (s, c) = (Bytes32([1; 32]), Bytes32([2; 32]));
        let p = client_proof(b"secret", &s, &c);
        assert!(verify_client(b"secret", &s, &c, &p));
        assert!(!verify_client(b"Secret", &s, &c, &p));
        assert!(!verify_client(b"secret", &c, &s, &p));
        // A client proof is not a server proof.
        assert!(!verify_server(b"secret", &s, &c, &p));
        assert!(verify_server(
            b"secret",
            &s,
            &c,
            &server_proof(b"secret", &s, &c)
        ));
        // A resume proof is neither, and an auth proof is not a resume proof.
        let r = resume_proof(b"secret", &s, &c);
        assert!(verify_resume(b"secret", &s, &c, &r));
        assert!(!verify_resume(b"other", &s, &c, &r));
        assert!(!verify_resume(b"secret", &s, &c, &p));
        assert!(!verify_client(b"secret", &s, &c, &r));
    }

    /// RFC 4231 test case 2 pins the HMAC-SHA256 construction itself.
    #[test]
    fn hmac_sha256_matches_rfc4231() {
        let mut m = HmacSha256::new_from_slice(b"Jefe").unwrap();
        m.update(b"what do ya want for nothing?");
        let hex: String = m
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
