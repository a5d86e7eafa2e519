//! A communicator's id: what the ranks of a communicator across processes need to meet,
//! made by one rank ([`CommId::new`]) and handed to the others however the application
//! likes (as NCCL's `ncclUniqueId`: 128 bytes, [`CommId::as_bytes`] /
//! [`CommId::from_bytes`]). It names a socket in the host's abstract namespace, so no file
//! system is shared; the ranks meet on one host (one network namespace).

use std::fmt;
use std::io::Read;

use crate::bootstrap::Rendezvous;
use crate::{Error, Result};

/// The bytes of an id: NCCL's `NCCL_UNIQUE_ID_BYTES`.
pub const COMM_ID_BYTES: usize = 128;

/// The first bytes of every id, and its version.
const MAGIC: &[u8; 8] = b"ferroccl";
const VERSION: u32 = 1;
/// Random bytes of an id: the rendezvous name is made of them.
const NONCE_BYTES: usize = 16;

/// A communicator's id (`Copy`, 128 bytes: magic, version, a random nonce, zeros).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CommId([u8; COMM_ID_BYTES]);

impl CommId {
    /// A new id, with 16 bytes from the system's random source.
    pub fn new() -> Result<Self> {
        let mut nonce = [0u8; NONCE_BYTES];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut nonce))
            .map_err(|e| Error::Bootstrap(format!("reading /dev/urandom for a communicator id: {e}")))?;
        let mut bytes = [0u8; COMM_ID_BYTES];
        bytes[..8].copy_from_slice(MAGIC);
        bytes[8..12].copy_from_slice(&VERSION.to_le_bytes());
        bytes[12..12 + NONCE_BYTES].copy_from_slice(&nonce);
        Ok(Self(bytes))
    }

    /// The id's bytes, to hand to the other ranks.
    pub fn as_bytes(&self) -> &[u8; COMM_ID_BYTES] {
        &self.0
    }

    /// The id whose bytes are `bytes` (what [`CommId::as_bytes`] gave): refused
    /// ([`Error::InvalidArgument`]) unless they are 128 bytes of an id of this version.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let bytes: [u8; COMM_ID_BYTES] = bytes.try_into().map_err(|_| Error::InvalidArgument(format!("a communicator id is {COMM_ID_BYTES} bytes, not {}", bytes.len())))?;
        if &bytes[..8] != MAGIC {
            return Err(Error::InvalidArgument("these bytes are no ferroccl communicator id (CommId::new makes one)".into()));
        }
        let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        if version != VERSION {
            return Err(Error::InvalidArgument(format!("a communicator id of version {version}; this build takes version {VERSION}")));
        }
        if bytes[12 + NONCE_BYTES..].iter().any(|&b| b != 0) {
            return Err(Error::InvalidArgument("a communicator id with bytes set past its nonce".into()));
        }
        Ok(Self(bytes))
    }

    /// An id every holder of this one derives alike from `salt` (and no holder of another
    /// id does): what ranks that share this communicator use to meet again, for a split.
    pub fn derive(&self, salt: &[u8]) -> Self {
        // Two FNV-1a hashes of the nonce and the salt, with different offsets: 128 bits.
        let fnv = |offset: u64| {
            self.0[12..12 + NONCE_BYTES].iter().chain(salt).fold(offset, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
        };
        let mut bytes = self.0;
        bytes[12..20].copy_from_slice(&fnv(0xcbf2_9ce4_8422_2325).to_le_bytes());
        bytes[20..28].copy_from_slice(&fnv(0x84222325_cbf29ce4).to_le_bytes());
        Self(bytes)
    }

    /// The nonce in hex.
    fn nonce_hex(&self) -> String {
        self.0[12..12 + NONCE_BYTES].iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Where the ranks meet: the abstract socket `ferroccl-<nonce>`.
    pub fn rendezvous(&self) -> Rendezvous {
        Rendezvous::Abstract(format!("ferroccl-{}", self.nonce_hex()).into_bytes())
    }
}

impl fmt::Debug for CommId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CommId({})", self.nonce_hex())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_survives_its_bytes_and_two_ids_differ() {
        let id = CommId::new().unwrap();
        assert_eq!(CommId::from_bytes(id.as_bytes()).unwrap(), id);
        assert_ne!(CommId::new().unwrap(), id);
        assert_eq!(id.rendezvous(), CommId::from_bytes(id.as_bytes()).unwrap().rendezvous());
    }

    #[test]
    fn derived_ids_agree_for_one_salt_and_differ_for_another() {
        let id = CommId::new().unwrap();
        let again = CommId::from_bytes(id.as_bytes()).unwrap();
        assert_eq!(id.derive(b"split 1 color 3"), again.derive(b"split 1 color 3"));
        assert_ne!(id.derive(b"split 1 color 3"), id.derive(b"split 1 color 4"));
        assert_ne!(id.derive(b"split 1 color 3"), id);
        assert_ne!(id.derive(b"x"), CommId::new().unwrap().derive(b"x"));
        assert_eq!(CommId::from_bytes(id.derive(b"x").as_bytes()).unwrap(), id.derive(b"x"));
    }

    #[test]
    fn bytes_of_no_id_are_refused() {
        let id = CommId::new().unwrap();
        assert!(matches!(CommId::from_bytes(&id.as_bytes()[..64]), Err(Error::InvalidArgument(_))));
        assert!(matches!(CommId::from_bytes(&[0u8; COMM_ID_BYTES]), Err(Error::InvalidArgument(_))));
        let mut newer = *id.as_bytes();
        newer[8] = 9;
        assert!(CommId::from_bytes(&newer).unwrap_err().to_string().contains("version 9"));
        let mut dirty = *id.as_bytes();
        dirty[100] = 1;
        assert!(matches!(CommId::from_bytes(&dirty), Err(Error::InvalidArgument(_))));
    }
}
